"""One difference between the nodes of a fleet: a field, every node's value, the majority and the odd nodes.

Below both fleet/compare.py (which finds them) and fleet/rules.py (whose node-wide rules make some directly).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Drift:
    area: str
    key: str
    verdict: str  # risky | benign
    why: str
    values: dict[str, str | None]  # node -> value (None: absent there)
    majority: str | None = None
    has_majority: bool = False
    odd: list[str] = field(default_factory=list)  # nodes off the majority (every node when there is none)

    @property
    def label(self) -> str:
        return f"{self.area}: {self.key}"

    def to_dict(self) -> dict[str, object]:
        return {"area": self.area, "key": self.key, "verdict": self.verdict, "why": self.why, "values": self.values,
                "majority": self.majority if self.has_majority else None, "odd": self.odd}
