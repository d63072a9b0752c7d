"""A released set may ship its prior reports as PDF: the agent reads them in the real jail with
pypdf (the paper's sandbox instruction: `PdfReader('x.pdf').pages[0].extract_text()`)."""

from __future__ import annotations

import pytest

from jail_episode import FINAL, ScriptedChat, attack_task, fenced
from tsbench.harness import HarnessSettings, play

pytestmark = pytest.mark.timeout(180)


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF whose page shows `text` in Helvetica, with a correct xref table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_pypdf_reads_a_prior_release_pdf_inside_the_jail():
    pdf = tiny_pdf("Stock position: ample. Latest stocks 1234.5 million lb.")
    block = (
        "from pypdf import PdfReader\n"
        "text = PdfReader('gt_source/2026-04.pdf').pages[0].extract_text()\n"
        "print('PDF TEXT', text)\n"
    )
    model = ScriptedChat([fenced(block), FINAL])
    outcome = play(
        model, "rlm", attack_task({"gt_source/2026-04.pdf": pdf}), HarnessSettings(max_turns=3, cell_timeout_s=60)
    )
    assert outcome.error is None, outcome.error
    observations = [entry["observation"] for entry in outcome.result.transcript if entry["role"] == "tool"]
    assert "PDF TEXT Stock position: ample. Latest stocks 1234.5 million lb." in observations[0], observations[0]
