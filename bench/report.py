"""Medians over the runs, and the markdown table: one row per figure, one column per system,
then duetime-postgres / peer ratios. Failures and caveats become numbered notes."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench import pressure_plan
from bench.systems.base import Setting
from bench.workloads import Result, drain_unit

# (workload, figure key, row label, format)
ROWS: list[tuple[str, str, str, str]] = [
    ("bulk", "bulk_jobs_s", "Bulk enqueue (jobs/s)", "{:,.0f}"),
    ("single", "single_jobs_s", "One-at-a-time enqueue (jobs/s)", "{:,.0f}"),
    ("drain1", "drain1_jobs_s", "Drain, 1 worker (jobs/s)", "{:,.0f}"),
    ("drain2", "drain2_jobs_s", "Drain, 2 workers (jobs/s)", "{:,.0f}"),
    ("drain4", "drain4_jobs_s", "Drain, 4 workers (jobs/s)", "{:,.0f}"),
    ("drain8", "drain8_jobs_s", "Drain, 8 workers (jobs/s)", "{:,.0f}"),
    ("ontime", "ontime_p50_ms", "Start on time: lag p50 (ms)", "{:,.1f}"),
    ("ontime", "ontime_p99_ms", "Start on time: lag p99 (ms)", "{:,.1f}"),
    ("ontime", "ontime_max_ms", "Start on time: lag max (ms)", "{:,.1f}"),
    ("ontime", "ontime_early", "Start on time: started before due (jobs)", "{:,.0f}"),
    ("burst", "burst_first_ms", "Burst: first start - T (ms)", "{:,.0f}"),
    ("burst", "burst_done_s", "Burst: all done - T (s)", "{:,.1f}"),
    ("drain1", "drain1_rss_mib", "Peak RSS per worker, drain 1 (MiB)", "{:,.1f}"),
    ("drain2", "drain2_rss_mib", "Peak RSS per worker, drain 2 (MiB, larger)", "{:,.1f}"),
    ("burst", "burst_rss_mib", "Peak RSS per worker, burst (MiB, larger)", "{:,.1f}"),
    (
        "backlog",
        "backlog_empty_drain_jobs_s",
        "Backlog: drain, empty (jobs/s)",
        "{:,.0f}",
    ),
    (
        "backlog",
        "backlog_full_drain_jobs_s",
        "Backlog: drain, backlog (jobs/s)",
        "{:,.0f}",
    ),
    ("backlog", "backlog_empty_claim_ms", "Backlog: claim(10) median, empty (ms)", "{:,.2f}"),
    ("backlog", "backlog_full_claim_ms", "Backlog: claim(10) median, backlog (ms)", "{:,.2f}"),
    ("outbox", "outbox_drain1_jobs_s", "Outbox mode: drain, relay + 1 worker (jobs/s)", "{:,.0f}"),
    ("outbox", "outbox_ontime_p50_ms", "Outbox mode: start lag p50 (ms)", "{:,.1f}"),
    ("outbox", "outbox_ontime_p99_ms", "Outbox mode: start lag p99 (ms)", "{:,.1f}"),
    ("outbox", "outbox_ontime_early", "Outbox mode: started before due (jobs)", "{:,.0f}"),
    (
        "bytes",
        "bytes_per_job",
        "Bytes per finished job: jobs + attempts (256-byte payload)",
        "{:,.0f}",
    ),
    (
        "bytes",
        "bytes_jobs_per_job",
        "Bytes per finished job: jobs, its TOAST and indexes",
        "{:,.0f}",
    ),
    (
        "bytes",
        "bytes_attempts_per_job",
        "Bytes per finished job: attempts and its indexes",
        "{:,.0f}",
    ),
    (
        "ceiling",
        "ceiling1_jobs_s",
        "Raw ceiling: claim + finish, 400 a batch, 1 client (jobs/s)",
        "{:,.0f}",
    ),
    (
        "ceiling",
        "ceiling2_jobs_s",
        "Raw ceiling: claim + finish, 400 a batch, 2 clients (jobs/s)",
        "{:,.0f}",
    ),
    (
        "ceiling",
        "ceiling4_jobs_s",
        "Raw ceiling: claim + finish, 400 a batch, 4 clients (jobs/s)",
        "{:,.0f}",
    ),
    ("ceiling", "ceiling1_load1", "Raw ceiling: load average before, 1 client", "{:,.1f}"),
    ("ceiling", "ceiling2_load1", "Raw ceiling: load average before, 2 clients", "{:,.1f}"),
    ("ceiling", "ceiling4_load1", "Raw ceiling: load average before, 4 clients", "{:,.1f}"),
    ("pressure", "pressure_clean_jobs_s", "Pressure: clean, finished (jobs/s)", "{:,.0f}"),
    ("pressure", "pressure_clean_p99_ms", "Pressure: clean, claim p99 (ms)", "{:,.1f}"),
    (
        "pressure",
        "pressure_hold_tp_ratio",
        "Pressure: held transaction, throughput / clean",
        "{:.2f}",
    ),
    ("pressure", "pressure_hold_p99_ratio", "Pressure: held transaction, p99 / clean", "{:.1f}x"),
    ("pressure", "pressure_load_tp_ratio", "Pressure: 1.5x load, throughput / clean", "{:.2f}"),
    ("pressure", "pressure_load_p99_ratio", "Pressure: 1.5x load, p99 / clean", "{:.1f}x"),
    ("pressure", "pressure_counts_tp_ratio", "Pressure: RR counts, throughput / clean", "{:.2f}"),
    ("pressure", "pressure_counts_p99_ratio", "Pressure: RR counts, p99 / clean", "{:.1f}x"),
    ("pressure", "pressure_pass", "Pressure: target met (1 yes, 0 no)", "{:.0f}"),
    (
        "fanout",
        "fanout_callback_ms",
        "Fan-out: last child's end to the callback's start (ms)",
        "{:,.1f}",
    ),
    ("fanout", "fanout_enqueue_s", "Fan-out: enqueue of the group (s)", "{:,.2f}"),
    (
        "fanout",
        "fanout_children_jobs_s",
        "Fan-out: children drained, 2 workers (jobs/s)",
        "{:,.0f}",
    ),
    ("flow", "flow_off_jobs_s", "Flow control off: drain, 2 workers (jobs/s)", "{:,.0f}"),
    ("flow", "flow_cap_jobs_s", "Flow: queue + tenant cap 1000 (jobs/s)", "{:,.0f}"),
    ("flow", "flow_cap_ratio", "Flow: cap / off", "{:.2f}x"),
    ("flow", "flow_weight_jobs_s", "Flow: tenant weight 2 (jobs/s)", "{:,.0f}"),
    ("flow", "flow_weight_ratio", "Flow: weight / off", "{:.2f}x"),
    ("flow", "flow_limit_jobs_s", "Flow: jobs carrying a limit key (jobs/s)", "{:,.0f}"),
    ("flow", "flow_limit_ratio", "Flow: limit / off", "{:.2f}x"),
    ("flow", "flow_all_jobs_s", "Flow: caps, weight and limit (jobs/s)", "{:,.0f}"),
    ("flow", "flow_all_ratio", "Flow: caps, weight and limit / off", "{:.2f}x"),
]

PEERS = ("pgqueuer", "procrastinate")
BASE = "duetime-postgres"
SAME_AS = "same configuration as "  # a skipped reason: this unit's figure is that unit's


def medians(results: list[Result]) -> dict[str, dict[str, dict[str, Any]]]:
    """workload -> system -> figure -> {median, values, runs}."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        by_fig = out.setdefault(r.workload, {}).setdefault(r.system, {})
        for key, value in r.figures.items():
            by_fig.setdefault(key, {"values": []})["values"].append(value)
    for systems in out.values():
        for figs in systems.values():
            for entry in figs.values():
                entry["median"] = statistics.median(entry["values"])
    return out


@dataclass
class Notes:
    texts: list[str] = field(default_factory=list)

    def mark(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"


def table(
    results: list[Result],
    systems: list[str],
    workloads: list[str],
    runs: int,
    skipped: dict[tuple[str, str], str],
) -> str:
    """The markdown table (and its notes) for the workloads that were run."""
    med = medians(results)
    notes = Notes()
    peers = [p for p in PEERS if p in systems and BASE in systems]
    header = ["Figure", *systems, *[f"duetime / {p}" for p in peers]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for workload, key, label, fmt in ROWS:
        if workload not in workloads:
            continue
        cells = [label]
        values: dict[str, float] = {}
        for system in systems:
            reason = skipped.get((workload, system))
            if reason is not None:
                cells.append("n/a" if reason.startswith("n/a") else f"not run {notes.mark(reason)}")
                continue
            mine = [r for r in results if r.workload == workload and r.system == system]
            entry = med.get(workload, {}).get(system, {}).get(key)
            marks = ""
            for r in mine:
                if r.note:
                    marks += notes.mark(f"{system}, {workload}, run {r.rep + 1}: {r.note}")
                elif r.warning:
                    marks += notes.mark(f"{system}, {workload}, run {r.rep + 1}: {r.warning}")
            if entry is None:
                schedules = [r.info.get("pressure", {}).get("phases") for r in mine]
                if pressure_plan.left_out(key, schedules):
                    cells.append("not run " + notes.mark("a pressure left out by --pressures"))
                    continue
                if not marks:
                    marks = notes.mark(f"{system}, {workload}: {key} was not reported")
                cells.append(f"failed {marks}")
                continue
            values[system] = entry["median"]
            text = fmt.format(entry["median"])
            if len(entry["values"]) < len(mine) or len(mine) < runs:
                text += f" ({len(entry['values'])}/{runs} runs)"
            cells.append(text + (f" {marks}" if marks else ""))
        for peer in peers:
            a, b = values.get(BASE), values.get(peer)
            cells.append(f"{a / b:.2f}x" if a is not None and b else "-")
        lines.append("| " + " | ".join(cells) + " |")
    if len(lines) == 2:
        return ""  # no workload of this table was run (the drain comparison has its own)
    out = "\n".join(lines) + "\n"
    out += (
        "\nMedians of the runs. Ratios divide the duetime-postgres figure by the peer's: above "
        "1 duetime has more (faster for jobs/s, slower for latencies and seconds). n/a: the "
        "workload is for duetime only (flow, fan-out), or duetime on PostgreSQL only "
        "(backlog). Flow ratios divide each setup's figure by the off figure of the same run.\n"
    )
    if notes.texts:
        out += "\n" + "\n".join(f"{i + 1}. {t}" for i, t in enumerate(notes.texts)) + "\n"
    return out


@dataclass
class Comparison:
    text: str  # markdown
    data: dict[str, Any]  # for the JSON


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def drain_comparison(
    results: list[Result],
    systems: list[str],
    settings: list[Setting],
    runs: int,
    skipped: dict[tuple[str, str], str],
    configs: dict[str, dict[str, dict[str, Any]]],
) -> Comparison:
    """The drain comparison: jobs/s (median of the runs) of each system in each configuration
    with the duetime-postgres / peer ratio at equal configuration; each system's best (over
    every configuration measured, and per number of worker processes) with its configuration
    and the ratio of the bests; and how each system was configured."""
    med = medians(results)
    notes = Notes()
    peers = [p for p in PEERS if p in systems and BASE in systems]

    def cell(setting: Setting, system: str) -> tuple[str, dict[str, Any] | None]:
        """(table cell, {median, values, rss, runs} or None) of one system in one setting."""
        unit = drain_unit(setting)
        reason = skipped.get((unit, system))
        if reason is not None and reason.startswith(SAME_AS):
            twin = Setting.parse(reason[len(SAME_AS) :].split(":", 1)[1])
            text, entry = cell(twin, system)
            return (text + f" (= {twin.label.split(',')[0]})", entry) if entry else (text, None)
        if reason is not None:
            return ("n/a" if reason.startswith("n/a") else f"not run {notes.mark(reason)}"), None
        mine = [r for r in results if r.workload == unit and r.system == system]
        marks = ""
        for r in mine:
            if r.note or r.warning:
                marks += notes.mark(
                    f"{system}, {setting.label}, run {r.rep + 1}: {r.note or r.warning}"
                )
        figs = med.get(unit, {}).get(system, {})
        entry = figs.get("drain_jobs_s")
        if entry is None:
            if not marks:
                marks = notes.mark(f"{system}, {setting.label}: no figure was reported")
            return f"failed {marks}", None
        text = f"{entry['median']:,.0f}"
        if len(entry["values"]) < runs:
            text += f" ({len(entry['values'])}/{runs} runs)"
        rss = figs.get("drain_rss_mib")
        data = {
            "setting": setting.key,
            "jobs_s": entry["median"],
            "values": entry["values"],
            "rss_mib": rss["median"] if rss else None,
        }
        return text + (f" {marks}" if marks else ""), data

    per_setting: dict[str, dict[str, Any]] = {}
    ratios: dict[str, dict[str, float]] = {}
    header = ["Configuration", *systems, *[f"duetime / {p}" for p in peers]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for setting in settings:
        row = [setting.label]
        got: dict[str, dict[str, Any]] = {}
        for system in systems:
            text, data = cell(setting, system)
            row.append(text)
            if data is not None:
                got[system] = data
        per_setting[setting.key] = got
        for peer in peers:
            a, b = got.get(BASE), got.get(peer)
            if a is not None and b is not None and b["jobs_s"]:
                ratios.setdefault(setting.key, {})[peer] = a["jobs_s"] / b["jobs_s"]
                row.append(f"{a['jobs_s'] / b['jobs_s']:.2f}x")
            else:
                row.append("-")
        lines.append("| " + " | ".join(row) + " |")

    # each system's best: over every configuration, and per number of worker processes
    procs = sorted({s.procs for s in settings})
    scopes: list[tuple[str, str, list[Setting]]] = [
        (
            f"p{n}",
            f"Best, {n} worker process{'es' if n > 1 else ''}",
            [s for s in settings if s.procs == n],
        )
        for n in procs
    ]
    if len(procs) > 1:
        scopes.append(("any", "Best of all", list(settings)))
    best: dict[str, dict[str, Any]] = {}
    best_ratios: dict[str, dict[str, float]] = {}
    header = ["Best drain (jobs/s)", *systems, *[f"duetime / {p}" for p in peers]]
    best_lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rss_rows: list[list[str]] = []
    for scope, label, members in scopes:
        row, rss_row = [label], [f"Peak RSS per worker at that best, {label[6:]} (MiB)"]
        for system in systems:
            found = [per_setting[s.key][system] for s in members if system in per_setting[s.key]]
            if not found:
                row.append("-")
                rss_row.append("-")
                continue
            top = max(found, key=lambda d: d["jobs_s"])
            best.setdefault(system, {})[scope] = top
            row.append(f"{top['jobs_s']:,.0f} ({Setting.parse(top['setting']).label})")
            rss_row.append("-" if top["rss_mib"] is None else f"{top['rss_mib']:,.1f}")
        for peer in peers:
            a, b = best.get(BASE, {}).get(scope), best.get(peer, {}).get(scope)
            if a is not None and b is not None and b["jobs_s"]:
                best_ratios.setdefault(peer, {})[scope] = a["jobs_s"] / b["jobs_s"]
                row.append(f"{a['jobs_s'] / b['jobs_s']:.2f}x")
            else:
                row.append("-")
            rss_row.append("")
        best_lines.append("| " + " | ".join(row) + " |")
        if scope != "any":
            rss_rows.append(rss_row)
    best_lines += ["| " + " | ".join(r) + " |" for r in rss_rows]

    config_lines = []
    for system in systems:
        kinds: dict[str, str] = {}
        for setting in settings:
            params = configs.get(system, {}).get(setting.key)
            if params is None:
                continue
            if setting.kind == "sweep":  # one line for every C: the values that are C
                head = "C"
                params = {k: "C" if v == setting.concurrency else v for k, v in params.items()}
            else:
                head = setting.label.rsplit(",", 1)[0]
            kinds.setdefault(head, _params_text(params))
        if kinds:
            config_lines.append(f"- {system}: " + "; ".join(f"{k}: {v}" for k, v in kinds.items()))

    text = (
        "### Drain: each system at its defaults and swept over concurrency\n\n"
        + "\n".join(best_lines)
        + "\n\n"
        + "\n".join(lines)
        + "\n\nMedians of the runs (jobs/s from the first job start to the last job done). "
        "Ratios divide duetime-postgres's figure by the peer's at the same configuration (the "
        "defaults row: each at its own defaults); in the best table, the bests. C: jobs at once "
        "per worker process, and the batch per fetch where the system has one. (= ...): the "
        "system's configuration is the same as that row's, measured once. Configurations "
        "(docs/performance.md):\n" + "\n".join(config_lines) + "\n"
    )
    if notes.texts:
        text += "\n" + "\n".join(f"{i + 1}. {t}" for i, t in enumerate(notes.texts)) + "\n"
    data = {
        "settings": [s.key for s in settings],
        "per_setting": per_setting,
        "ratios": ratios,
        "best": best,
        "best_ratios": best_ratios,
        "configs": configs,
    }
    return Comparison(text, data)


def machine_lines(refs: dict[str, Any]) -> str:
    pgb = refs.get("pgbench", {})
    fs = refs.get("fsync", {})
    parts = [
        f"- machine: {refs.get('cpus')} CPUs, {refs.get('mem_gib')} GiB, "
        f"PostgreSQL {refs.get('postgres_version')}",
    ]
    if "note" in pgb and "tps_c2" not in pgb:
        parts.append(f"- pgbench: {pgb['note']}")
    else:
        parts.append(
            f"- pgbench -N (simple update), {pgb.get('seconds')} s each: "
            f"{_num(pgb.get('tps_c2'))} TPS with 2 clients, {_num(pgb.get('tps_c8'))} with 8"
            + (f" ({pgb['note']})" if "note" in pgb else "")
        )
    if "fdatasync_per_s" in fs:
        parts.append(
            f"- fdatasync: {fs['fdatasync_per_s']:,.0f} per second (8 KiB writes, {fs['where']})"
        )
    else:
        parts.append(f"- fdatasync: {fs.get('note', 'not measured')}")
    return "\n".join(parts) + "\n"


def _num(value: float | None) -> str:
    return "not measured" if value is None else f"{value:,.0f}"


def bytes_table(results: list[Result], systems: list[str]) -> str:
    """The bytes workload's breakdown: bytes per finished job of each table, its TOAST and
    each index, per system (median over the runs)."""
    per: dict[str, dict[str, list[float]]] = {}
    for r in results:
        if r.workload != "bytes" or not r.figures or "sizes" not in r.info:
            continue
        jobs = r.info["jobs"]
        for relation, size in r.info["sizes"].items():
            per.setdefault(relation, {}).setdefault(r.system, []).append(size / jobs)
    shown = [s for s in systems if any(s in v for v in per.values())]
    if not per or not shown:
        return ""
    lines = [
        "Bytes per finished job, per relation (a 256-byte payload; PostgreSQL after a plain "
        "VACUUM; docs/performance.md):",
        "",
        "| Relation | " + " | ".join(shown) + " |",
        "|---|" + "---|" * len(shown),
    ]
    for relation in sorted(per):
        cells = []
        for s in shown:
            values = per[relation].get(s)
            cells.append(f"{statistics.median(values):,.0f}" if values else "")
        lines.append(f"| {relation} | " + " | ".join(cells) + " |")
    for r in results:
        updates = r.info.get("updates") if r.workload == "bytes" else None
        if updates:
            lines.append("")
            lines.append(
                f"{r.system}, run {r.rep + 1}, the drain's row writes (pg_stat_user_tables): "
                + "; ".join(
                    f"{t}: {updates.get(t + '.ins', 0):,} inserts, {updates.get(t + '.upd', 0):,} "
                    f"updates of which {updates.get(t + '.hot_upd', 0):,} HOT"
                    for t in ("duetime_jobs", "duetime_jobs_done", "duetime_attempts")
                )
            )
    return "\n".join(lines) + "\n"


def ceiling_lines(results: list[Result], drains: dict[str, Any] | None = None) -> str:
    """duetime's drains as a share of the raw ceiling of the same run (medians): drain1 over
    the ceiling with 1 client, drain2 over the ceiling with 2; with the drain comparison of
    the same run (`drains`: its data), each system's best with 1 and with 2 worker processes
    against the highest ceiling, and what issue 22's drain target (duetime's best at least
    1.5x each peer's) asks of it."""
    med = medians(results)
    mine = {w: figs.get(BASE, {}) for w, figs in med.items()}
    lines = []
    for n in (1, 2):
        drain = mine.get(f"drain{n}", {}).get(f"drain{n}_jobs_s")
        ceiling = mine.get("ceiling", {}).get(f"ceiling{n}_jobs_s")
        if drain and ceiling:
            lines.append(
                f"- {BASE}: drain with {n} worker(s) {drain['median']:,.0f} jobs/s = "
                f"{drain['median'] / ceiling['median']:.0%} of the raw ceiling with {n} "
                f"client(s), {ceiling['median']:,.0f} jobs/s (bench/ceiling.py)"
            )
    ceilings = {
        key: entry["median"]
        for key, entry in mine.get("ceiling", {}).items()
        if key.startswith("ceiling") and key.endswith("_jobs_s")
    }
    if ceilings and drains:
        key, top = max(ceilings.items(), key=lambda kv: kv[1])
        clients = key[len("ceiling") : -len("_jobs_s")]
        lines.append(
            f"- the highest raw ceiling: {top:,.0f} jobs/s ({clients} clients); each "
            "system's best drain against it:"
        )
        for system, scopes in drains.get("best", {}).items():
            for n in (1, 2):
                best = scopes.get(f"p{n}")
                if best is None:
                    continue
                text = f"  - {system}, {n} worker process(es): {best['jobs_s']:,.0f} jobs/s = "
                text += f"{best['jobs_s'] / top:.0%} of it"
                if system != BASE:
                    wanted = 1.5 * best["jobs_s"]
                    text += (
                        f"; 1.5x that is {wanted:,.0f} jobs/s, {wanted / top:.0%} of duetime's "
                        "raw ceiling"
                    )
                lines.append(text)
    return "\n".join(lines) + "\n" if lines else ""


def _wal_rates(samples: list[dict[str, Any]], start: float, end: float) -> dict[str, float]:
    """The server's WAL per second between the last sample at or before a phase's start and
    its last sample within it (bench/pressure.py db_sample): MB, full-page images, syncs; none
    where the samples have no WAL figures (a run before they were sampled)."""
    before = [s for s in samples if s["t"] <= start and "wal_bytes" in s]
    within = [s for s in samples if start < s["t"] <= end and "wal_bytes" in s]
    if not before or not within:
        return {}
    a, b = before[-1], within[-1]
    seconds = b["at"] - a["at"]
    if seconds <= 0:
        return {}
    per_s = {
        key: (b[key] - a[key]) / seconds
        for key in ("wal_bytes", "wal_fpi", "wal_sync")
        if key in a and key in b  # wal_sync: PostgreSQL 14 to 17
    }
    if "wal_bytes" in per_s:
        per_s["wal_bytes"] /= 1e6
    return per_s


def _md_cell(text: str) -> str:
    """A statement's start as text for a table's cell: no pipe or backtick to end it early."""
    return text.replace("|", "/").replace("`", "'")


def _cell(value: Any, fmt: str = "{:,.0f}", none: str = "-") -> str:
    return none if value is None else fmt.format(value)


def _server_text(server: dict[str, Any]) -> str:
    s = server.get("settings", {})
    where = "a PostgreSQL of its own" if server.get("kind") == "private" else "the shared server"
    return (
        f"{where} ({s.get('server_version', '?')}, autovacuum {s.get('autovacuum', '?')}, "
        f"naptime {s.get('autovacuum_naptime', '?')}, fsync {s.get('fsync', '?')})"
    )


def pressure_tables(results: list[Result], max_rows: int = 60) -> str:
    """The pressure workload (bench/pressure.py): per run, the phases, the verdict against
    issue 22's target and the samples (thinned to at most `max_rows` rows)."""
    out: list[str] = []
    for r in results:
        doc = r.info.get("pressure") if r.workload == "pressure" else None
        if not doc:
            if r.workload == "pressure" and r.note:
                out.append(f"Under pressure, {r.system}, run {r.rep + 1}: {r.note}\n")
            continue
        verdict = doc["verdict"]
        samples = doc["samples"]
        workers = doc.get("workers") or {"concurrency": doc["concurrency"]}
        settings = ", ".join(
            f"{name} {'no cap' if value is None else value}" for name, value in workers.items()
        )
        tables = doc.get("tables", {})
        out.append(
            f"Under pressure, {r.system}, run {r.rep + 1}: {doc['rate']:,.0f} jobs/s offered "
            f"(1 ms jobs) to {doc['procs']} worker processes ({settings}), phases at "
            f"{doc['scale']:.3g} of full length, a sample every {doc['step']:g} s; "
            f"load average {_cell(doc.get('load1_mean'), '{:.1f}')} (mean of the samples); "
            f"{_server_text(doc.get('server', {}))}"
            + ("; the samples' tables: " if tables else "")
            + ", ".join(f"`{t}` as {short}" for t, short in tables.items())
            + f": **{'meets' if verdict['pass'] else 'misses'} the target**"
        )
        out.append("")
        out.append(
            "| Phase | s | offered/s | enqueued/s | finished/s | claim p50 ms | claim p99 ms | "
            "never claimed | dead tuples, peak | dead tuples, end | MB at end (tables + TOAST / "
            "indexes) | bytes per job, end | load avg | probe p99 ms: wake / SELECT 1 |"
        )
        out.append("|---|" + "---|" * 13)
        probe = doc.get("probe", {})
        for ph in doc["phases"]:
            f = doc["figures"][ph["name"]]
            seconds = ph["end"] - ph["start"]
            mine = [s for s in samples if ph["start"] < s["t"] <= ph["end"]]
            last = mine[-1] if mine else None
            shorts = pressure_plan.SHORTS
            tables = sum(last.get(f"table_{t}", 0) for t in shorts) if last else None
            indexes = sum(last.get(f"indexes_{t}", 0) for t in shorts) if last else None
            seen = probe.get(ph["name"], {})
            peak = max((s["dead_jobs"] + s["dead_attempts"] for s in mine), default=None)
            bpj = last["bytes_total"] / last["jobs"] if last and last["jobs"] else None
            load = sum(s["load1"] for s in mine) / len(mine) if mine else None
            out.append(
                f"| {ph['name']} | {seconds:.0f} | {doc['rate'] * ph['factor']:,.0f} | "
                f"{f['enqueued'] / seconds:,.0f} | "
                f"{f['finished'] / seconds:,.0f} | {_cell(f['p50_ms'], '{:,.1f}')} | "
                f"{_cell(f['p99_ms'], '{:,.1f}')} | {f['missing']:,} | {_cell(peak)} | "
                f"{_cell(last and last['dead_jobs'] + last['dead_attempts'])} | "
                f"{_cell(tables and tables / 1e6)} / {_cell(indexes and indexes / 1e6)} | "
                f"{_cell(bpj)} | {_cell(load, '{:.1f}')} | "
                f"{_cell(seen.get('wake_p99_ms'), '{:.1f}')} / "
                f"{_cell(seen.get('trip_p99_ms'), '{:.1f}')} |"
            )
        clean = verdict["clean"]
        out.append("")
        out.append(
            "| Pressure | finished/s over offered/s, vs clean (>= 0.80) | "
            "claim p99 vs clean (<= 2.0x) | dead tuples at recovery end (<= clean peak "
            f"{_cell(clean['dead_level'])}) | "
            "bytes per job at recovery end (<= 1.1 x clean "
            f"{_cell(clean['bytes_per_job_level'])}) | met |"
        )
        out.append("|---|---|---|---|---|---|")
        for name, ph in verdict["phases"].items():
            mark = {k: "" if ok else " **no**" for k, ok in ph["checks"].items()}
            out.append(
                f"| {name} | {ph['throughput_ratio']:.2f}{mark['throughput']} | "
                f"{_cell(ph['p99_ratio'], '{:.1f}x', 'unbounded')}{mark['p99']} | "
                f"{_cell(ph['dead_after'])}{mark['dead_tuples']} | "
                f"{_cell(ph['bytes_per_job_after'])}{mark['size']} | "
                f"{'yes' if ph['pass'] else 'no'} |"
            )
        calls, after = doc.get("enqueue_calls", {}), doc.get("claims_after_calls", {})
        if calls:
            out.append("")
            out.append(
                "The enqueuer's calls and the claims after them (not judged): how long a call "
                "took (its jobs' claim latency counts from before it), and each claim counted "
                "from the end of its job's call instead"
            )
            out.append("")
            out.append("| Phase | enqueue call p50 / p99 ms | claim after its call p50 / p99 ms |")
            out.append("|---|---|---|")
            for ph in doc["phases"]:
                c, a = calls.get(ph["name"], {}), after.get(ph["name"], {})
                out.append(
                    f"| {ph['name']} | {_cell(c.get('p50_ms'), '{:.1f}')} / "
                    f"{_cell(c.get('p99_ms'), '{:.1f}')} | {_cell(a.get('p50_ms'), '{:.1f}')}"
                    f" / {_cell(a.get('p99_ms'), '{:.1f}')} |"
                )
        waits = doc.get("waits", {})
        if waits or any("wal_bytes" in x for x in samples):
            out.append("")
            out.append(
                "The server's WAL, the counting connections and the database's backends per "
                "phase (not judged): WAL a second, the count transactions a second and the "
                "plans a planning of the count chose at the samples; then, from the probe's "
                "samples of pg_stat_activity every 0.1 s, the average number of backends not "
                "idle, and the largest pairs of what one ran (its statement's start) and what "
                "it waited for (cpu: no wait), as the average number of backends in each"
            )
            out.append("")
            out.append(
                "| Phase | WAL MB/s | full-page images/s | WAL syncs/s | counts/s | the count's "
                "plans (samples) | backends not idle | the largest pairs |"
            )
            out.append("|---|---|---|---|---|---|---|---|")
            for ph in doc["phases"]:
                w = waits.get(ph["name"], {})
                wal = _wal_rates(samples, ph["start"], ph["end"])
                pairs = "; ".join(
                    f"`{_md_cell(what)}` {wait} {share:.2f}"
                    for what, wait, share in w.get("top", [])[:6]
                )
                mine = [x for x in samples if ph["start"] < x["t"] <= ph["end"]]
                rate = [x["counts_per_s"] for x in mine if "counts_per_s" in x]
                plans = Counter(x["count_plan"] for x in mine if x.get("count_plan"))
                chosen = "; ".join(f"{_md_cell(plan)} ({n})" for plan, n in plans.items())
                out.append(
                    f"| {ph['name']} | {_cell(wal.get('wal_bytes'), '{:.2f}')} | "
                    f"{_cell(wal.get('wal_fpi'))} | {_cell(wal.get('wal_sync'))} | "
                    f"{_cell(sum(rate) / len(rate) if rate else None)} | {chosen or '-'} | "
                    f"{_cell(w.get('backends_mean'), '{:.2f}')} | {pairs or '-'} |"
                )
        every = max(1, -(-len(samples) // max_rows))
        out.append("")
        out.append(
            f"Samples (every {every * doc['step']:g} s; all of them in the JSON): "
            "finished and claim latency of the attempts finished / claimed in the step before"
        )
        out.append("")
        out.append(
            "| t s | phase | offered/s | enqueued/s | finished/s | p50 ms | p99 ms | queued | "
            "dead jobs | dead attempts | jobs MB (table / idx) | attempts MB (table / idx) | "
            "xmin age | longest statement s | lock waits | CPU workers | CPU pg | "
            "CPU orchestrator | CPU machine | load | counts/s |"
        )
        out.append("|---|" + "---|" * 20)
        for s in samples[every - 1 :: every]:
            out.append(
                f"| {s['t']:.0f} | {s['phase']} | {_cell(s.get('offered_per_s'))} | "
                f"{_cell(s.get('enqueued_per_s'))} | "
                f"{_cell(s.get('finished_per_s'))} | {_cell(s.get('p50_ms'), '{:,.1f}')} | "
                f"{_cell(s.get('p99_ms'), '{:,.1f}')} | {s['queued']:,} | {s['dead_jobs']:,} | "
                f"{s['dead_attempts']:,} | {s['table_jobs'] / 1e6:,.0f} / "
                f"{s['indexes_jobs'] / 1e6:,.0f} | {s['table_attempts'] / 1e6:,.0f} / "
                f"{s['indexes_attempts'] / 1e6:,.0f} | {s['xmin_age']:,} | "
                f"{s.get('longest_active_s', 0):,.1f} | {s.get('lock_waits', 0)} | "
                f"{s['cpu_workers']:.2f} | {s['cpu_postgres']:.2f} | "
                f"{_cell(s.get('cpu_orchestrator'), '{:.2f}')} | "
                f"{_cell(s.get('cpu_machine'), '{:.2f}')} | {s['load1']:.1f} | "
                f"{_cell(s.get('counts_per_s'))} |"
            )
        out.append("")
    return "\n".join(out) + ("\n" if out else "")
