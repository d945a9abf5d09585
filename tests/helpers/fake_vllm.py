#!/usr/bin/env python3
"""A stand-in for `vllm serve` where no GPU is (vLLM needs one): it takes vLLM's own arguments
(serve MODEL --host --port --served-model-name --enable-lora --lora-modules NAME=PATH
--max-lora-rank R), refuses an adapter folder without adapter_config.json as vLLM does, and
serves the OpenAI-compatible /v1/models and /v1/chat/completions. The adapter's name answers
the harness's tasks.json right (the recorded answers); the base model answers wrong, so a score
tells which of the two was asked. It writes what it was started with to fake-vllm.json."""

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("verb", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default="")
    parser.add_argument("--enable-lora", action="store_true")
    parser.add_argument("--lora-modules", nargs="*", default=[])
    parser.add_argument("--max-lora-rank", type=int, default=16)
    args, extra = parser.parse_known_args()
    loras = dict(module.split("=", 1) for module in args.lora_modules)
    if loras and not args.enable_lora:
        print("--lora-modules needs --enable-lora", file=sys.stderr)
        return 2
    for name, path in loras.items():
        config = Path(path) / "adapter_config.json"
        if not config.exists():
            print(f"no adapter_config.json in {path} for {name}", file=sys.stderr)
            return 2
        if json.loads(config.read_text()).get("r", 16) > args.max_lora_rank:
            print(
                f"the adapter's rank is over --max-lora-rank {args.max_lora_rank}", file=sys.stderr
            )
            return 2
    base = args.served_model_name or args.model
    answers = {
        t["prompt"]: t["answer"] for t in json.loads(Path("tasks.json").read_text(encoding="utf-8"))
    }
    Path("fake-vllm.json").write_text(json.dumps({"argv": sys.argv[1:], "extra": extra}))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def reply(self, body: dict, status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path != "/v1/models":
                return self.reply({"error": "not found"}, 404)
            self.reply({"data": [{"id": base}, *({"id": n, "parent": base} for n in loras)]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/chat/completions" or body["model"] not in (base, *loras):
                return self.reply({"error": {"message": f"no model {body.get('model')}"}}, 404)
            prompt = body["messages"][-1]["content"]
            said = answers.get(prompt, "?") if body["model"] in loras else "I am not sure."
            self.reply({"choices": [{"message": {"role": "assistant", "content": f"{said}."}}]})

    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
