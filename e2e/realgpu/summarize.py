#!/usr/bin/env python3
"""Gathers what scripts/real-gpu.sh measured into one JSON summary: the GPU,
the model and engine, each sweep point's perf figures with the independent
client's beside them and the cross-check verdict, its eval (n_eff, mean
answer length), the mean power over its perf window, and the gate runs.

    summarize.py --res DIR --sweep-id ID --sweep-exit N --smoke 0|1 --out summary.json
"""
import argparse
import csv
import datetime as dt
import glob
import json
import os
import re
import statistics


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def unix(rfc3339):
    """RFC 3339 with up to nanoseconds -> Unix seconds."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", rfc3339 or "")
    if not m:
        return None
    base = dt.datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    return base.timestamp() + (float(m.group(2)) if m.group(2) else 0.0)


def power(samples, t0, t1):
    """Mean power over [t0, t1]: of the samples inside, and from NVML's
    energy counter (joules between the samples nearest the ends)."""
    inside = [s for s in samples if t0 <= s["t"] <= t1]
    out = {"window_s": round(t1 - t0, 3), "samples": len(inside)}
    if inside:
        out["mean_w"] = round(statistics.fmean(s["p"] for s in inside), 1)
        out["max_w"] = round(max(s["p"] for s in inside), 1)
        out["mean_gpu_util_pct"] = round(statistics.fmean(s["u"] for s in inside), 1)
    e = [s for s in samples if s["e"] is not None]
    if len(e) >= 2:
        a = min(e, key=lambda s: abs(s["t"] - t0))
        b = min(e, key=lambda s: abs(s["t"] - t1))
        if b["t"] > a["t"]:
            out["energy_j"] = round(b["e"] - a["e"], 1)
            out["mean_w_energy_counter"] = round((b["e"] - a["e"]) / (b["t"] - a["t"]), 1)
    return out


def read_power(path):
    out = []
    try:
        with open(path) as f:
            for r in csv.DictReader(f):
                out.append({"t": float(r["unix_s"]), "p": float(r["power_w"]),
                            "e": float(r["energy_j"]) if r["energy_j"] else None,
                            "u": float(r["gpu_util_pct"] or 0)})
    except (OSError, ValueError, KeyError):
        pass
    return out


def gate_run(res, name):
    txt = os.path.join(res, "gate", name + ".txt")
    try:
        lines = [l.rstrip() for l in open(txt) if l.strip()]
    except OSError:
        return None
    rc = None
    if lines and lines[-1].startswith("exit "):
        rc = int(lines[-1].split()[1])
        lines = lines[:-1]
    agg = load(os.path.join(res, "gate", name, "aggregate.json"), {})
    verdict = next((l for l in reversed(lines) if "invalid perf result" in l or "gate failed" in l or "error" in l.lower()), None)
    return {
        "exit": rc,
        "passed": rc == 0,
        "reason": verdict if rc else "passed both gates (loadgen's error-rate gate and the validity gate)",
        "completed": agg.get("completed"),
        "failed": agg.get("failed"),
        "error_categories": agg.get("error_categories"),
        "median_ttft_ms": ms(agg.get("median_ttft")),
        "median_itl_ms": ms(agg.get("median_itl")),
        "median_itl_per_token_ms": ms(agg.get("median_itl_per_token")),
        "mean_chunks_per_request": agg.get("mean_chunks_per_request"),
        "mean_output_tokens": agg.get("mean_output_tokens"),
        "client_lag": agg.get("client_lag"),
    }


def ms(s):
    return None if s is None else round(1000 * s, 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--res", required=True)
    ap.add_argument("--sweep-id", required=True)
    ap.add_argument("--sweep-exit", type=int, required=True)
    ap.add_argument("--smoke", default="0")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    res = a.res
    probe = load(os.path.join(res, "probe.json"), {})
    samples = read_power(os.path.join(res, "power.csv"))
    points = []
    for agg_path in sorted(glob.glob(os.path.join(res, "perf", "*_conc*.json")), key=lambda p: int(re.search(r"_conc(\d+)\.json$", p).group(1))):
        agg = load(agg_path, {})
        conc = agg.get("conc")
        p = {
            "conc": conc,
            "file": os.path.basename(agg_path),
            "isl": agg.get("isl"), "osl": agg.get("osl"),
            "completed": agg.get("completed"), "failed": agg.get("failed"),
            "mean_input_tokens": agg.get("mean_input_tokens"), "mean_output_tokens": agg.get("mean_output_tokens"),
            "median_ttft_ms": ms(agg.get("median_ttft")), "p90_ttft_ms": ms(agg.get("p90_ttft")),
            "mean_itl_ms": ms(agg.get("mean_itl")), "median_itl_ms": ms(agg.get("median_itl")),
            "median_tpot_ms": ms(agg.get("median_tpot")),
            "mean_e2el_s": agg.get("mean_e2el"),
            "output_throughput_tok_s": agg.get("output_throughput"),
            "total_token_throughput_tok_s": agg.get("total_token_throughput"),
            "client_lag": agg.get("client_lag"),
            "window_s": agg.get("window"),
            "started_at": agg.get("started_at"),
            "simulated": agg.get("simulated"),
        }
        t0 = unix(agg.get("started_at"))
        if t0 is not None and samples:
            p["power"] = power(samples, t0, t0 + (agg.get("window") or agg.get("duration") or 0))
        # sweepflow's own power figures (nvidia-smi through the worker's
        # local backend, judged by the power gate) beside the fixture's NVML.
        for sp in load(os.path.join(res, "status.json"), {}).get("points") or []:
            if sp.get("conc") == conc and (sp.get("perf") or {}).get("power"):
                p["sweepflow_power"] = sp["perf"]["power"]
        cc = os.path.join(res, "crosscheck", f"c{conc}")
        cl = load(os.path.join(cc, "client_summary.json"))
        if cl:
            p["independent_client"] = {
                "median_ttft_ms": ms(cl.get("median_ttft")), "mean_itl_ms": ms(cl.get("mean_itl")),
                "mean_e2el_s": cl.get("mean_e2el"), "output_throughput_tok_s": cl.get("output_throughput"),
                "completed": cl.get("completed"), "failed": cl.get("failed"),
            }
        v = load(os.path.join(cc, "verdict.json"))
        if v:
            p["crosscheck"] = {"agree": v.get("agree"), "reason": v.get("reason"),
                               "rel": {d["figure"]: round(d["rel"], 5) for d in v.get("differences", [])},
                               "mean_e2el_rel": round(v.get("mean_e2el", {}).get("rel", 0), 5),
                               "sweepflow_recomputed": v.get("ours")}
        points.append(p)
    evals = []
    for ep in glob.glob(os.path.join(res, "perf", "eval_*.json")):
        if "eval_samples_" in ep:
            continue
        rec = load(ep, {})
        sp = ep.replace("eval_", "eval_samples_", 1).replace(".json", ".jsonl")
        resp = []
        try:
            with open(sp) as f:
                resp = [json.loads(l).get("response", "") for l in f if l.strip()]
        except OSError:
            pass
        evals.append({
            "file": os.path.basename(ep),
            "record": rec,
            "answers": len(resp),
            "mean_answer_chars": round(statistics.fmean(len(r) for r in resp), 1) if resp else 0,
            "mean_answer_words": round(statistics.fmean(len(r.split()) for r in resp), 1) if resp else 0,
            "empty_answers": sum(1 for r in resp if not r.strip()),
            "first_answer": resp[0][:200] if resp else None,
        })
    status = load(os.path.join(res, "status.json"))
    gates = {k: gate_run(res, k) for k in ("chunk4", "queue", "fail")}
    whole = power(samples, samples[0]["t"], samples[-1]["t"]) if samples else None
    s = {
        "issue": 39,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"),
        "smoke": a.smoke == "1",
        "gpu": probe.get("cuda"),
        "probe": probe,
        "model": load(os.path.join(res, "model_info.json")),
        "engine": load(os.path.join(res, "server_info.json")),
        "engine_degraded": load(os.path.join(res, "server_info_degraded.json")),
        "sweep": {"id": a.sweep_id, "exit": a.sweep_exit, "status": status},
        "points": points,
        "evals": evals,
        "gate_runs": gates,
        "power_whole_run": whole,
    }
    s["acceptance"] = {
        "every_point_completed": a.sweep_exit == 0 and bool(points) and all(p["failed"] == 0 for p in points),
        "crosscheck_agrees": bool(points) and all((p.get("crosscheck") or {}).get("agree") for p in points),
        "good_gate_runs_passed": bool(gates["chunk4"] and gates["chunk4"]["passed"]),
        "eval_real_generations": bool(evals) and all(e["answers"] > 0 and e["mean_answer_chars"] > 0 for e in evals),
    }
    with open(a.out, "w") as f:
        json.dump(s, f, indent=2)
    short = {k: v for k, v in s.items() if k not in ("probe", "sweep")}
    short["sweep"] = {"id": a.sweep_id, "exit": a.sweep_exit}
    print(json.dumps(short, indent=1)[:6000])


if __name__ == "__main__":
    main()
