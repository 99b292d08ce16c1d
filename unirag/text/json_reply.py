"""Kept only for importers not yet moved: the JSON readers live in :mod:`unirag.text.replies`.

``unirag/index/{archrag,hygrag,leanrag}.py`` still import from here; once they
import from :mod:`unirag.text.replies`, delete this module.
"""

from __future__ import annotations

from unirag.text.replies import first_object, repair_json

__all__ = ["first_object", "repair_json"]
