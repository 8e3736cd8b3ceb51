"""`rerun`'s view: the plan or what was rerun draws itself (sparkdoctor/conclusions/documents.py)."""

from __future__ import annotations

from sparkdoctor.conclusions.documents import RerunDocument
from sparkdoctor.views.documents import self_drawn

VIEW = self_drawn(RerunDocument)
