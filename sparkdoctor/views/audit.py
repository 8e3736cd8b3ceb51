"""`audit`'s view: the checkpoint's fit as a console table for a person (GB, 10^9 bytes, the unit bandwidth is
quoted in, and in words where each assumption came from), or its JSON document (audit/report.py)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape as e
from rich.table import Table

from sparkdoctor.audit.report import audit_to_dict
from sparkdoctor.audit.roofline import Audit
from sparkdoctor.result import Format
from sparkdoctor.views import View


def _gb(n: float) -> str:
    if n == 0:
        return "0"
    if n >= 1e9:
        return f"{n / 1e9:.2f} GB"
    if n >= 1e6:
        return f"{n / 1e6:.1f} MB"
    return f"{n / 1e3:.1f} kB"


def _params(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M"


def _names(formats: dict[str, int]) -> str:
    return " + ".join(f for f, _ in sorted(formats.items(), key=lambda kv: -kv[1]))


def _table(audit: Audit) -> Table:
    """The byte table: `stored` is what the files hold; where vLLM casts a group (--dtype, or a float32 checkpoint under
    auto) a `served` column gives what it holds, and the format reads `BF16 as F32`."""
    served = any(g.cast for g in audit.groups)
    table = Table(show_edge=False, pad_edge=False)
    columns = [("group", "left"), ("format", "left"), ("params", "right"), ("stored", "right")]
    columns += [("served", "right")] if served else []
    for column, justify in (*columns, ("read/token", "right"), ("note", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for g in audit.groups:
        formats = _names(g.formats) or "-"
        if g.cast and _names(g.formats_served) != formats:
            formats += f" as {_names(g.formats_served)}"
        cells = [e(g.label), e(formats), _params(g.params) if g.params else "", _gb(g.bytes_stored) if g.bytes_stored else ""]
        cells += [_gb(g.bytes_served) if g.bytes_served else ""] if served else []
        table.add_row(*cells, _gb(g.bytes_read), e(g.note))
    return table


def render_console(audit: Audit, console: Console) -> None:
    o, s = audit.options, audit.shape
    kinds = ", ".join(f"{s.count(k)} {k}" for k in sorted(set(s.layer_kinds)))
    moe = f", MoE top-{s.experts_per_token} of {s.experts}" if s.experts else ""
    console.print(f"[bold]{e(str(audit.folder))}[/bold]  {e(s.model_type)}: {s.layers} layers ({e(kinds)}){moe}")
    for q in audit.quant:
        console.print(e(f"quantization: {q.scheme} [{q.method}, {q.source}]"))
    console.print(_table(audit))
    console.print(f"per token: weights {_gb(audit.weights_per_token)} + KV cache {_gb(audit.kv_per_token)} "
                  f"({o.context} tokens of context, {e(audit.kv_dtype)})"
                  + (f" + recurrent state {_gb(audit.state_per_token)}" if audit.state_per_token else "")
                  + f" = [bold]{_gb(audit.bytes_per_token)}[/bold]")
    console.print(f"active parameters per token: {_params(round(audit.active_params))}")
    console.print(f"unquantized (BF16/F16/F32) share of weight bytes read: [bold]{audit.unquantized_share:.1%}[/bold]")
    console.print(f"ceiling at {audit.bandwidth:g} GB/s ({e(audit.bandwidth_source)}): [bold]{audit.ceiling:.1f} tok/s[/bold] single-stream"
                  + (f"; batch {o.batch}: {o.batch * audit.bandwidth * 1e9 / audit.step_bytes:.1f} tok/s aggregate" if o.batch > 1 else ""))
    if s.experts:
        console.print("  (routed experts count k/E of their bytes: the expected value for uniform routing)")
    f = audit.fit
    verdict = "[green]fits[/green]" if f.fits else "[red]does not fit[/red]"
    console.print(f"fit: weights {_gb(f.weights)} + KV {_gb(f.kv_cache)} ({f.judged_seqs or f.max_num_seqs} x {f.max_model_len} tokens) "
                  f"vs {f.utilization:g} x {f.memory_gib:.1f} GiB = {_gb(f.budget)}: {verdict}")
    if f.full_length_seqs < f.max_num_seqs:
        console.print(f"  the memory left after the weights holds {f.full_length_seqs} sequences of {f.max_model_len} tokens; "
                      f"vLLM admits up to {f.max_num_seqs} and preempts when their KV outgrows the pool")
    for note in o.notes:
        console.print(f"[yellow]note[/yellow]: {e(note)}")
    if o.sources:
        console.print("fit settings:")
        for k, v in o.sources.items():
            value = getattr(o, k)
            if k == "max_model_len" and value is None:  # not set (or auto): the length the fit used, the model's
                value = f"{f.max_model_len} (the model's length)"
            console.print(e(f"  {k} = {value}  <- {v}"))
    for d in audit.disagreements:
        times = f" (x{d.count})" if d.count > 1 else ""
        console.print("[yellow]config vs tensors[/yellow] " + e(f"{d.module}{times}: {d.detail} [{d.source}]"))
    console.print(f"read {audit.bytes_read:,} header bytes of {audit.bytes_on_disk:,} on disk", style="dim")


VIEW = View(Audit, {
    # a terminal's own width (it was 140 columns there too: a 40-column terminal broke every table row in two)
    Format.console: lambda result, sink: sink.wide(lambda console: render_console(result.data, console)),
    Format.json: lambda result, sink: audit_to_dict(result.data)})
