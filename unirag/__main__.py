"""``python -m unirag`` runs the command-line interface."""

from unirag.cli import main

main()
