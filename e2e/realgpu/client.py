#!/usr/bin/env python3
"""The independent cross-check client of the real-GPU run: Python standard
library only, its own clock and its own arithmetic. It replays request
bodies (the ones sweepflow's perf stage sent, as server.py's --request-log
recorded them) against an OpenAI-compatible streaming server, closed loop at
a fixed concurrency, and measures each stream itself.

Definitions (vLLM's benchmark_serving, which InferenceX publishes):
  TTFT   send -> first chunk whose delta.content (or text) is non-empty
  ITL    every gap between consecutive such chunks, pooled over requests
  E2EL   send -> the last such chunk
  output throughput  sum of usage.completion_tokens / (start of dispatch ->
         the last response fully read)
Times are time.perf_counter_ns() taken right after the socket read that
delivered a line; a line is parsed only after its time is taken.

    client.py --base-url URL --log requests-received.jsonl
              --records POINT_requests.jsonl --concurrency C --out-dir DIR
              [--warmups N]

It replays the requests of sweepflow's perf run whose records --records
holds (loadgen's requests JSONL), in their order, found in the server's log
by their shapes; --warmups first replays, unmeasured, the N requests the log
holds just before them (sweepflow's warmup stage: 2 x conc). It writes
DIR/client_requests.jsonl (one record a request, times in ns from the start
of dispatch) and DIR/client_summary.json.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
import urllib.parse


def shape(body):
    """(max_tokens, prompt words) of a request body: what a sweepflow
    request record also holds (max_tokens, requested_prompt_tokens)."""
    b = json.loads(body)
    if "messages" in b:
        text = " ".join(m.get("content") or "" for m in b["messages"])
    else:
        text = b.get("prompt") or ""
    return (b.get("max_tokens"), len(text.split()))


def select(log_path, records_path, warmups):
    """The bodies sweepflow's perf run sent, in its request order, and the
    warmups sent just before them. The server logged them in arrival order;
    the perf run is the window of the log whose request shapes are exactly
    those of the run's records (loadgen's requests JSONL)."""
    with open(log_path, encoding="utf-8") as f:
        log = [r for r in (json.loads(l) for l in f) if not r.get("eval")]
    with open(records_path, encoding="utf-8") as f:
        recs = [r for r in (json.loads(l) for l in f) if not r.get("warmup")]
    want = [(r["max_tokens"], r["requested_prompt_tokens"]) for r in recs]
    n = len(want)
    shapes = [shape(r["body"]) for r in log]
    target = sorted(want)
    for start in range(len(log) - n, -1, -1):  # the latest match: a retried perf run replaces an earlier one
        if sorted(shapes[start:start + n]) == target:
            window = log[start:start + n]
            by_shape = {}
            for r, sh in zip(window, shapes[start:start + n]):
                by_shape.setdefault(sh, []).append(r)
            ordered = [by_shape[sh].pop(0) for sh in want]
            return log[max(start - warmups, 0):start], ordered
    sys.exit(f"client.py: no run of {n} requests in {log_path} has the shapes of {records_path}")


class Conn:
    def __init__(self, base):
        u = urllib.parse.urlparse(base)
        self.host, self.port = u.hostname, u.port or 80
        self.c = None

    def post(self, path, body):
        if self.c is None:
            self.c = http.client.HTTPConnection(self.host, self.port, timeout=3600)
            self.c.connect()
            import socket

            self.c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.c.request("POST", path, body=body, headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        return self.c.getresponse()


def measure(conn, t0, entry):
    """Sends one request and times its stream; times in ns since t0."""
    rec = {"send_ns": None, "chunks_ns": [], "chunk_chars": [], "completion_tokens": None, "prompt_tokens": None, "error": None}
    body = entry["body"].encode()
    rec["send_ns"] = time.perf_counter_ns() - t0
    try:
        resp = conn.post(entry["path"], body)
        if resp.status != 200:
            rec["error"] = f"HTTP {resp.status}: {resp.read()[:200]!r}"
            rec["end_ns"] = time.perf_counter_ns() - t0
            return rec
        while True:
            line = resp.readline()
            now = time.perf_counter_ns() - t0
            if not line:
                break
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            obj = json.loads(data)
            if "error" in obj and obj["error"]:
                rec["error"] = json.dumps(obj["error"])[:300]
                break
            if obj.get("usage"):
                rec["completion_tokens"] = obj["usage"].get("completion_tokens")
                rec["prompt_tokens"] = obj["usage"].get("prompt_tokens")
            for ch in obj.get("choices") or []:
                text = (ch.get("delta") or {}).get("content") if "delta" in ch else ch.get("text")
                if text:
                    rec["chunks_ns"].append(now)
                    rec["chunk_chars"].append(len(text))
        resp.read()
    except Exception as e:  # noqa: BLE001 - every failure is counted, none is fatal
        rec["error"] = f"{type(e).__name__}: {e}"
        conn.c = None
    rec["end_ns"] = time.perf_counter_ns() - t0
    if not rec["error"] and not rec["chunks_ns"]:
        rec["error"] = "no content chunk"
    if not rec["error"] and rec["completion_tokens"] is None:
        rec["error"] = "no usage"
    return rec


def run(base, entries, conc):
    """Closed loop: conc workers take the entries in order."""
    recs = [None] * len(entries)
    nxt = [0]
    lock = threading.Lock()
    t0 = time.perf_counter_ns()

    def worker():
        conn = Conn(base)
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(entries):
                return
            recs[i] = measure(conn, t0, entries[i])

    ts = [threading.Thread(target=worker) for _ in range(min(conc, len(entries)))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return recs, t0


def pct(sorted_vals, p):
    """numpy's linear-interpolated percentile."""
    if not sorted_vals:
        return 0.0
    k = (len(sorted_vals) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def summarize(recs):
    ok = [r for r in recs if not r["error"]]
    ttft = sorted((r["chunks_ns"][0] - r["send_ns"]) / 1e9 for r in ok)
    e2el = sorted((r["chunks_ns"][-1] - r["send_ns"]) / 1e9 for r in ok)
    itl = sorted((b - a) / 1e9 for r in ok for a, b in zip(r["chunks_ns"], r["chunks_ns"][1:]))
    out_tokens = sum(r["completion_tokens"] for r in ok)
    duration = max(r["end_ns"] for r in recs) / 1e9 if recs else 0.0
    s = {
        "client": "e2e/realgpu/client.py (Python standard library)",
        "python": sys.version.split()[0],
        "completed": len(ok),
        "failed": len(recs) - len(ok),
        "total_output_tokens": out_tokens,
        "total_input_tokens": sum(r["prompt_tokens"] or 0 for r in ok),
        "duration": duration,
        "output_throughput": out_tokens / duration if duration > 0 else 0.0,
        "mean_ttft": statistics.fmean(ttft) if ttft else 0.0,
        "median_ttft": pct(ttft, 50),
        "p99_ttft": pct(ttft, 99),
        "mean_itl": statistics.fmean(itl) if itl else 0.0,
        "median_itl": pct(itl, 50),
        "p99_itl": pct(itl, 99),
        "mean_e2el": statistics.fmean(e2el) if e2el else 0.0,
        "median_e2el": pct(e2el, 50),
        "chunks": sum(len(r["chunks_ns"]) for r in ok),
    }
    errs = {}
    for r in recs:
        if r["error"]:
            k = r["error"].split(":")[0]
            errs[k] = errs.get(k, 0) + 1
    s["errors"] = errs
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--log", required=True, help="server.py --request-log of the run to replay")
    ap.add_argument("--records", required=True, help="loadgen's requests JSONL of the perf run to replay")
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--warmups", type=int, default=0)
    ap.add_argument("--out-dir", required=True)
    a = ap.parse_args()
    warm, meas = select(a.log, a.records, a.warmups)
    if warm:
        wrecs, _ = run(a.base_url, warm, a.concurrency)
        bad = sum(1 for r in wrecs if r["error"])
        print(f"client.py: {len(warm)} warmups replayed, {bad} failed", file=sys.stderr)
    recs, _ = run(a.base_url, meas, a.concurrency)
    s = summarize(recs)
    s.update({"concurrency": a.concurrency, "requests": len(meas), "warmups": len(warm), "replayed_from": os.path.basename(a.log)})
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "client_requests.jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(a.out_dir, "client_summary.json"), "w") as f:
        json.dump(s, f, indent=2)
    print(json.dumps(s))


if __name__ == "__main__":
    main()
