"""`fix`'s view: each mode's document draws itself (sparkdoctor/fix/documents.py)."""

from __future__ import annotations

from sparkdoctor.fix.documents import FixDocument
from sparkdoctor.views.documents import self_drawn

VIEW = self_drawn(FixDocument)
