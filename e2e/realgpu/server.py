#!/usr/bin/env python3
"""A test fixture: a minimal OpenAI-compatible streaming HTTP front over
transformers' continuous batching (ContinuousBatchingManager), for the
real-GPU run (scripts/real-gpu.sh). The scheduler, the paged KV cache and the
kernels are transformers'; this file only turns HTTP requests into
add_request calls and generated tokens into SSE chunks. It is not part of
sweepflow.

It serves what sweepflow's clients send (loadgen, the GSM8K eval) and what
vLLM answers:

  GET  /health                 200 once the model is loaded, 503 before
  GET  /v1/models              the served model
  POST /v1/chat/completions    chat (one template), streaming or not
  POST /v1/completions         plain prompt, streaming or not
  POST /flush_cache            200: prefix sharing is off, nothing is cached
  GET  /server/info            engine, model, KV cache, GPU (JSON)

Request fields: max_tokens, stream, stream_options.include_usage (and
continuous_usage_stats: usage on every chunk, as vLLM), ignore_eos, stop.
Decoding is greedy (temperature is ignored: the weights are random).
"stream_interval" (a fixture field, also --stream-interval) sends a chunk
every k tokens instead of every token, as vLLM's --stream-interval does: the
client then meets several tokens in one chunk.

--request-log appends every request body with its arrival time and its
warmup/eval headers, so the independent client (client.py) can replay the
exact workload sweepflow sent.

Flags in $REALGPU_SERVER_ARGS are appended to the command line (the local
backend's serve-command is fixed per cluster profile).

--engine fake replaces the model with a CPU stand-in (one token per active
request every --fake-step-ms, words of a small vocabulary) so the HTTP front
and the whole sweep can be tested on a machine without a GPU or torch.
"""
import argparse
import json
import os
import queue
import shlex
import socket
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHAT_OPEN, CHAT_CLOSE = "<|im_start|>", "<|im_end|>"


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


class Output:
    """One update of a request: all tokens generated so far."""

    __slots__ = ("tokens", "finished", "error")

    def __init__(self, tokens, finished, error=None):
        self.tokens, self.finished, self.error = tokens, finished, error


class CBEngine:
    """transformers' ContinuousBatchingManager on the GPU."""

    def __init__(self, a):
        import torch
        import transformers
        from tokenizers import Tokenizer
        from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

        self.torch = torch
        self.tok = Tokenizer.from_file(os.path.join(a.model_dir, "tokenizer.json"))
        cfg = AutoConfig.from_pretrained(a.model_dir)
        self.eos = cfg.eos_token_id
        self.sinks = {}
        self.lock = threading.Lock()
        self.params = 0
        self.info = {}
        # The attention implementation continuous batching takes differs
        # between releases ("paged|sdpa", "sdpa_paged", or plain "sdpa"
        # switched to paged by the manager): try each until a request runs.
        tried = []
        for attn in dict.fromkeys([a.attn, "sdpa", "paged|sdpa", "sdpa_paged"]):
            try:
                self._load(a, cfg, attn, AutoModelForCausalLM, GenerationConfig)
                self._selftest()
                self.info["attn_implementation"] = attn
                break
            except Exception as e:  # noqa: BLE001 - the next implementation may work
                import traceback

                traceback.print_exc()
                tried.append(f"{attn}: {type(e).__name__}: {e}")
                log(f"attention {attn!r} failed: {e}")
                m = getattr(self, "manager", None)
                if m is not None:
                    try:
                        m.stop(block=True, timeout=10)
                    except Exception:  # noqa: BLE001
                        pass
                self.manager, self.model = None, None
                torch.cuda.empty_cache()
        else:
            raise RuntimeError("no attention implementation served a request: " + "; ".join(tried))
        self.info.update({
            "engine": "transformers ContinuousBatchingManager",
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0),
            "parameters": self.params,
            "dtype": "bfloat16",
            "continuous_batching": self.cb_settings,
            "attempts_failed": tried,
        })
        cache = getattr(getattr(self.manager, "batch_processor", None), "cache", None)
        if cache is not None:
            for k in ("num_blocks", "block_size", "max_batch_tokens", "num_pages"):
                v = getattr(cache, k, None)
                if isinstance(v, int):
                    self.info["kv_" + k] = v

    def _load(self, a, cfg, attn, AutoModelForCausalLM, GenerationConfig):
        torch = self.torch
        torch.manual_seed(a.seed)
        t0 = time.time()
        with torch.device("cuda"):
            try:
                model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation=attn)
            except TypeError:
                model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16, attn_implementation=attn)
        self.model = model.to(device="cuda", dtype=torch.bfloat16).eval()
        self.params = sum(p.numel() for p in model.parameters())
        log(f"model: {type(model).__name__}, {self.params/1e9:.3f} B parameters, random weights (seed {a.seed}), attention {attn!r}, {time.time()-t0:.1f} s")
        gen = GenerationConfig(max_new_tokens=256, do_sample=False, pad_token_id=0)
        cb_kwargs = {"block_size": a.block_size, "allow_block_sharing": False}
        if a.num_blocks > 0:
            cb_kwargs["num_blocks"] = a.num_blocks
        if a.max_batch_tokens > 0:
            cb_kwargs["max_batch_tokens"] = a.max_batch_tokens
        if a.cuda_graph:
            cb_kwargs["use_cuda_graph"] = True
        init = {"generation_config": gen}
        try:
            from transformers.generation import ContinuousBatchingConfig
        except ImportError:
            ContinuousBatchingConfig = None
        import inspect

        if ContinuousBatchingConfig is not None:
            accepted = set(inspect.signature(ContinuousBatchingConfig).parameters)
            use = {k: v for k, v in cb_kwargs.items() if k in accepted}
            self.cb_settings = dict(use, ignored=sorted(set(cb_kwargs) - accepted))
            init["continuous_batching_config"] = ContinuousBatchingConfig(**use)
        else:  # older releases read these from the generation config
            for k, v in cb_kwargs.items():
                setattr(gen, k, v)
            self.cb_settings = dict(cb_kwargs, via="generation_config")
        self.manager = self.model.init_continuous_batching(**init)
        if hasattr(self.manager, "warmup") and a.cb_warmup:
            t1 = time.time()
            self.manager.warmup()
            log(f"continuous batching warmup {time.time()-t1:.1f} s")
        self.manager.start()
        self.add_params = set(inspect.signature(self.manager.add_request).parameters)
        if not getattr(self, "_router", None):
            self._router = threading.Thread(target=self._route, daemon=True, name="router")
            self._router.start()

    def _selftest(self):
        """One short request through the whole path before /health says ok."""
        q = queue.Queue()
        t0 = time.time()
        self.submit("selftest-" + uuid.uuid4().hex[:8], self.encode("Janet has 3 apples and buys 5 more."), 8, -1, q)
        out = q.get(timeout=300)
        while not out.finished:
            out = q.get(timeout=300)
        if out.error or len(out.tokens) != 8:
            raise RuntimeError(f"self-test request: {out.error or len(out.tokens)} tokens")
        log(f"self-test: 8 tokens in {time.time()-t0:.2f} s")

    def _route(self):
        # One reader of the manager's output queue hands each update to its
        # request's queue: the HTTP threads never poll the shared queue.
        from transformers.generation.continuous_batching import RequestStatus

        while True:
            m = self.manager
            if m is None:
                time.sleep(0.05)
                continue
            out = m.get_result(timeout=0.05)
            if out is None:
                running = getattr(m, "is_running", None)
                if running is not None and not running():
                    with self.lock:
                        sinks = list(self.sinks.values())
                    for s in sinks:
                        s.put(Output([], True, "the generation loop stopped"))
                    time.sleep(0.5)
                continue
            with self.lock:
                sink = self.sinks.get(out.request_id)
            if sink is None:
                continue
            failed = out.status == RequestStatus.FAILED or out.error
            done = out.status == RequestStatus.FINISHED or failed
            sink.put(Output(list(out.generated_tokens), done, (out.error or "request failed") if failed else None))
            if done:
                with self.lock:
                    self.sinks.pop(out.request_id, None)

    def submit(self, rid, ids, max_new, eos, sink):
        with self.lock:
            self.sinks[rid] = sink
        kw = {"request_id": rid, "max_new_tokens": max_new, "streaming": True}
        if "eos_token_id" in self.add_params:
            kw["eos_token_id"] = eos if eos is not None else -1
        self.manager.add_request(ids, **kw)

    def cancel(self, rid):
        with self.lock:
            self.sinks.pop(rid, None)
        self.manager.cancel_request(rid)

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=True)


class FakeEngine:
    """A CPU stand-in: every --fake-step-ms, each active request gets one
    token (after its prompt's "prefill" of --fake-prefill-us per token).
    Tokens are words of a small vocabulary, one id each."""

    WORDS = ["alpha", "beta", "gamma", "delta", "the", "answer", "is", "7", "plus", "3", "\n", "####"]

    def __init__(self, a):
        self.step, self.prefill_us = a.fake_step_ms / 1000, a.fake_prefill_us
        self.active, self.lock = {}, threading.Lock()
        self.vocab = {}
        self.eos = None
        self.params = 0
        self.info = {"engine": "fake (CPU stand-in, no model)", "step_ms": a.fake_step_ms}
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        n = 0
        while True:
            time.sleep(self.step)
            now = time.monotonic()
            with self.lock:
                items = list(self.active.items())
            for rid, st in items:
                if now < st["ready"]:
                    continue
                n += 1
                st["toks"].append(n % len(self.WORDS))
                done = len(st["toks"]) >= st["max"]
                st["sink"].put(Output(list(st["toks"]), done))
                if done:
                    with self.lock:
                        self.active.pop(rid, None)

    def submit(self, rid, ids, max_new, eos, sink):
        with self.lock:
            self.active[rid] = {"toks": [], "max": max_new, "sink": sink,
                                "ready": time.monotonic() + len(ids) * self.prefill_us / 1e6}

    def cancel(self, rid):
        with self.lock:
            self.active.pop(rid, None)

    def encode(self, text):
        return [hash(w) % 1000 for w in text.split()]

    def decode(self, ids):
        return "".join(self.WORDS[i] + ("" if self.WORDS[i] == "\n" else " ") for i in ids)


class Detok:
    """Incremental detokenization: text is released only once the tokens
    so far decode to complete characters (a byte-level BPE can split one)."""

    def __init__(self, engine):
        self.e, self.prefix, self.read, self.text = engine, 0, 0, ""

    def feed(self, ids):
        prev = self.e.decode(ids[self.prefix:self.read])
        cur = self.e.decode(ids[self.prefix:])
        if len(cur) > len(prev) and not cur.endswith("\ufffd"):
            delta = cur[len(prev):]
            self.prefix, self.read = self.read, len(ids)
            self.text += delta
            return delta
        return ""


class State:
    engine = None
    ready = threading.Event()
    args = None
    log_lock = threading.Lock()
    log_file = None


def chat_prompt(messages):
    parts = []
    for m in messages:
        c = m.get("content") or ""
        if isinstance(c, list):
            c = "".join(p.get("text", "") for p in c if isinstance(p, dict))
        parts.append(f"{CHAT_OPEN}{m.get('role', 'user')}\n{c}{CHAT_CLOSE}\n")
    return "".join(parts) + f"{CHAT_OPEN}assistant\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sweepflow-realgpu-fixture"

    def setup(self):
        super().setup()
        # Each chunk goes out when written: no Nagle delay on small writes.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        pass

    def _json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            if State.ready.is_set():
                return self._json(200, {"status": "ok"})
            return self._json(503, {"status": "loading"})
        if self.path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{"id": State.args.served_model_name, "object": "model", "owned_by": "sweepflow-realgpu"}]})
        if self.path == "/server/info":
            info = dict(State.engine.info) if State.engine else {"status": "loading"}
            return self._json(200, info)
        self._json(404, {"error": {"message": "not found: " + self.path}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.path == "/flush_cache":
            return self._json(200 if State.ready.is_set() else 503, {"flushed": State.ready.is_set(), "note": "prefix sharing is off"})
        chat = self.path.rstrip("/").endswith("/chat/completions")
        if not chat and not self.path.rstrip("/").endswith("/completions"):
            return self._json(404, {"error": {"message": "not found: " + self.path}})
        if not State.ready.is_set():
            return self._json(503, {"error": {"message": "model is loading"}})
        try:
            req = json.loads(raw)
        except ValueError as e:
            return self._json(400, {"error": {"message": f"bad JSON: {e}"}})
        if State.log_file:
            rec = {"t": time.time(), "path": self.path, "warmup": bool(self.headers.get("X-Sweepflow-Warmup")),
                   "eval": bool(self.headers.get("X-Sweepflow-Eval")), "body": raw.decode("utf-8", "replace")}
            with State.log_lock:
                State.log_file.write(json.dumps(rec) + "\n")
                State.log_file.flush()
        self.serve(req, chat)

    def serve(self, req, chat):
        e = State.engine
        if chat:
            prompt = chat_prompt(req.get("messages") or [])
        else:
            prompt = req.get("prompt") or ""
            if isinstance(prompt, list):
                prompt = prompt[0] if prompt else ""
        ids = e.encode(prompt)
        max_new = int(req.get("max_tokens") or req.get("max_completion_tokens") or 256)
        stops = req.get("stop") or []
        if isinstance(stops, str):
            stops = [stops]
        eos = None if req.get("ignore_eos") else e.eos
        stream = bool(req.get("stream"))
        so = req.get("stream_options") or {}
        interval = max(int(req.get("stream_interval") or State.args.stream_interval), 1)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        model = req.get("model") or State.args.served_model_name
        sink = queue.Queue()
        e.submit(rid, ids, max_new, eos, sink)
        det = Detok(e)
        usage = {"prompt_tokens": len(ids), "completion_tokens": 0, "total_tokens": len(ids)}

        def chunk(delta_text=None, finish=None, role=False, with_usage=False):
            if chat:
                delta = {}
                if role:
                    delta = {"role": "assistant", "content": ""}
                elif delta_text is not None:
                    delta = {"content": delta_text}
                ch = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                obj = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [ch]}
            else:
                ch = {"index": 0, "text": delta_text or "", "logprobs": None, "finish_reason": finish}
                obj = {"id": rid, "object": "text_completion", "created": created, "model": model, "choices": [ch]}
            if with_usage:
                obj["usage"] = dict(usage)
            return obj

        if stream:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
        cont = bool(so.get("continuous_usage_stats"))

        def send(obj):
            data = ("data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        finish, error, pending, n_tok = None, None, "", 0
        try:
            if stream and chat:
                send(chunk(role=True, with_usage=cont))
            while True:
                out = sink.get()
                # Updates that queued up while this thread wrote go out together.
                while not out.finished:
                    try:
                        out = sink.get_nowait()
                    except queue.Empty:
                        break
                if out.error:
                    error = out.error
                    break
                toks = out.tokens
                if eos is not None and toks and toks[-1] == eos:
                    toks = toks[:-1]
                    finish = "stop"
                delta = det.feed(toks) if len(toks) > det.read else ""
                usage["completion_tokens"] = len(out.tokens)
                usage["total_tokens"] = len(ids) + len(out.tokens)
                pending += delta
                hit = next((s for s in stops if s and s in det.text), None)
                if hit:
                    cut = det.text.index(hit)
                    keep = len(pending) - (len(det.text) - cut)
                    pending = pending[:max(keep, 0)]
                    finish = "stop"
                    e.cancel(rid)
                done = out.finished or finish == "stop"
                if done and finish is None:
                    finish = "length"
                if stream and pending and (done or n_tok == 0 or len(toks) - n_tok >= interval):
                    send(chunk(pending, with_usage=cont))
                    pending, n_tok = "", len(toks)
                if done:
                    break
            if not stream:
                if error:
                    return self._json(500, {"error": {"message": error, "type": "engine_error"}})
                text = det.text
                hit = next((s for s in stops if s and s in text), None)
                if hit:
                    text = text[:text.index(hit)]
                if chat:
                    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                    obj = {"id": rid, "object": "chat.completion", "created": created, "model": model, "choices": [choice], "usage": usage}
                else:
                    choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
                    obj = {"id": rid, "object": "text_completion", "created": created, "model": model, "choices": [choice], "usage": usage}
                return self._json(200, obj)
            if error:
                send({"error": {"message": error, "type": "engine_error", "code": 500}})
            else:
                send(chunk(None if chat else "", finish=finish, with_usage=cont))
                if so.get("include_usage"):
                    obj = chunk()
                    obj["choices"] = []
                    obj["usage"] = usage
                    send(obj)
            send_done = b"data: [DONE]\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(send_done), send_done))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            e.cancel(rid)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:8000")
    ap.add_argument("--model-dir", help="config.json and tokenizer.json (make_model.py)")
    ap.add_argument("--served-model-name", default="sweepflow/random-llama-0.4b")
    ap.add_argument("--engine", choices=["cb", "fake"], default="cb")
    ap.add_argument("--seed", type=int, default=1234, help="seed of the random weights")
    ap.add_argument("--attn", default="sdpa", help="attention implementation to try first (others follow if no request runs)")
    ap.add_argument("--block-size", type=int, default=256, help="KV cache block size in tokens")
    ap.add_argument("--num-blocks", type=int, default=0, help="KV cache blocks (0: transformers sizes the cache from free memory)")
    ap.add_argument("--max-batch-tokens", type=int, default=0, help="token budget of one forward pass (0: transformers' default)")
    ap.add_argument("--cuda-graph", action="store_true", help="use_cuda_graph=True")
    ap.add_argument("--cb-warmup", action="store_true", help="call the manager's warmup() (graph capture) before serving")
    ap.add_argument("--stream-interval", type=int, default=1, help="tokens per streamed chunk")
    ap.add_argument("--request-log", help="append every request body here (JSONL)")
    ap.add_argument("--fake-step-ms", type=float, default=20)
    ap.add_argument("--fake-prefill-us", type=float, default=5)
    # The local backend passes its environment on: a cluster profile's one
    # serve-command takes per-run flags (a smaller KV cache, the fake engine).
    a = ap.parse_args(sys.argv[1:] + shlex.split(os.environ.get("REALGPU_SERVER_ARGS", "")))
    State.args = a
    if a.request_log:
        State.log_file = open(a.request_log, "a", encoding="utf-8")
    host, port = a.listen.rsplit(":", 1)
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 1024
    srv = ThreadingHTTPServer((host, int(port)), Handler)
    log(f"listening on http://{a.listen} (engine {a.engine}); loading")

    def load():
        try:
            State.engine = FakeEngine(a) if a.engine == "fake" else CBEngine(a)
            State.ready.set()
            log("ready:", json.dumps(State.engine.info))
        except Exception:
            import traceback

            traceback.print_exc()
            log("loading failed")
            os._exit(3)

    threading.Thread(target=load, daemon=True).start()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
