"""`conclusions`' view: the conclusions judged draw themselves (sparkdoctor/conclusions/documents.py)."""

from __future__ import annotations

from sparkdoctor.conclusions.documents import ConclusionsDocument
from sparkdoctor.views.documents import self_drawn

VIEW = self_drawn(ConclusionsDocument)
