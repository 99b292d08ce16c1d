"""Methods declared as data (``specs/*.yaml``) and the one runner that executes them."""
