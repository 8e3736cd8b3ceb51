"""`fix`'s view: each mode's document draws itself (sparkdoctor/fix/documents.py)."""

from sparkdoctor.fix.documents import FixDocument
from sparkdoctor.views import self_drawn

VIEW = self_drawn(FixDocument)
