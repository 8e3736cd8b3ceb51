"""What the anonymizer took that names no one, and what it left that does: `hf_transfer` and `hf_overrides` (a
package and a vLLM argument) became `<redacted>`, a pinned `nvidia-cudnn-cu12==9.1.0.70` in a resolver's error became
`<ip>`; a GPU's UUID as torch prints it (`uuid=...`, no GPU- prefix), a serial after a plain space, and a serial- or
UUID-named field of the snapshot (the JSON key is not in the text the scan reads) were kept."""

from __future__ import annotations

import re

import pytest

from sparkdoctor.anonymize import Redactor
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from sparkdoctor.views.markdown import render_markdown
from tests.gb10 import gb10_facts
from tests.report.bug_report import REPORT_FORMATS, whole_report

UUID = "8f3c5a0e-1b2d-4c3e-9f4a-0123456789ab"
SERIAL = "1652524012345"


@pytest.mark.parametrize(
    "text",
    [
        "[pip3] hf_transfer==0.1.9",
        "import hf_transfer failed",
        "LLM(model, hf_overrides={'architectures': ['X']})",
        "ERROR: nvidia-cudnn-cu12==9.1.0.70 is required, torch>=2.9.0.1 too",
        "HF_HUB_ENABLE_HF_TRANSFER=1",
        "serial ttyS0 at 115200",
        "USB serial converter",
        f"request {UUID} done",
    ],
)
def test_names_and_versions_are_kept(text):
    assert Redactor().text(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "HF_TOKEN=<redacted>"),
        (
            "token hf_abcdefghijklmnopqrstuvwxyzABCDEFGH in a log",
            "token <redacted> in a log",
        ),
        (
            f"_CudaDeviceProperties(name='NVIDIA GB10', major=12, minor=1, uuid={UUID}, L2_cache_size=24MB)",
            "_CudaDeviceProperties(name='NVIDIA GB10', major=12, minor=1, uuid=<serial>, L2_cache_size=24MB)",
        ),
        (
            f"board serial {SERIAL} and uuid {UUID}",
            "board serial <serial> and uuid <serial>",
        ),
        (f"GPU UUID : GPU-{UUID}", "GPU UUID : GPU-<serial>"),
        ("peer 10.0.0.1 -> 10.0.0.2", "peer <ip> -> <ip>"),
    ],
)
def test_secrets_serials_and_addresses_go_once(text, expected):
    redactor = Redactor()
    assert redactor.text(text) == expected and redactor.text(expected) == expected


def _shown(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)  # as GitHub shows the markdown


@pytest.mark.parametrize("fmt", [*REPORT_FORMATS, "check-markdown"])
def test_a_serial_or_uuid_named_field_of_the_snapshot_does_not_leak(fmt):
    facts = gb10_facts(packages={"triton": "3.5.1"})
    facts.gpus = [
        {
            **(facts.gpus or [{}])[0],
            "uuid": f"GPU-{UUID}",
            "serial": int(SERIAL),
            "board_serial": "PX2YB41K0037",
        }
    ]
    report = build_report(facts, load(None))
    text = _shown(
        render_markdown(report)
        if fmt == "check-markdown"
        else whole_report(report, fmt, redact=True)
    )
    assert [s for s in (UUID, SERIAL, "PX2YB41K0037") if s in text] == []
    assert (
        fmt == "forum" or '"uuid": "GPU-<serial>"' in text
    )  # the forum form carries no snapshot


@pytest.mark.parametrize("fmt", REPORT_FORMATS)
def test_a_fleet_nodes_own_names_do_not_leak(fmt):
    """A fleet node's Facts (`fleet check --format json`'s `nodes[N].facts`) name the node in `fleet.node` and
    `fleet.hostname`; the findings quote it ("unknown on node zeta7"). Those names were never learned."""
    facts = gb10_facts(
        packages={"triton": "3.5.1"},
        fleet={"node": "zeta7", "hostname": "zetabox", "boot_id": "x"},
    )
    facts.errors = [{"collector": "nccl", "error": "connecting to zetabox from zeta7"}]
    text = _shown(whole_report(build_report(facts, load(None)), fmt, redact=True))
    assert "zeta" not in text and "<host>" in text
