"""`belvedir models upload|list|run`: fine-tuned models (a LoRA adapter zip on a base model)."""

import secrets
from pathlib import Path

from belvedir.cli.client import Client, CliError, out
from belvedir.text import score_text, size_text

CHUNK = 1024 * 1024


class MultipartBody:
    """multipart/form-data with one file part, streamed from disk in chunks. Its length is
    known up front, so it goes out with a Content-Length (no chunked encoding, which WSGI
    servers do not read) and the file is never held in memory."""

    def __init__(self, fields: dict[str, str], file_field: str, path: Path):
        self.boundary = "belvedir-" + secrets.token_hex(16)
        self.path = path
        head = b"".join(
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
            f"{value}\r\n".encode()
            for name, value in fields.items()
        )
        filename = path.name.replace('"', "")
        head += (
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{file_field}"; '
            f'filename="{filename}"\r\nContent-Type: application/zip\r\n\r\n'
        ).encode()
        self.head = head
        self.tail = f"\r\n--{self.boundary}--\r\n".encode()
        self.size = path.stat().st_size

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def __len__(self) -> int:
        return len(self.head) + self.size + len(self.tail)

    def __iter__(self):
        yield self.head
        with self.path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                yield chunk
        yield self.tail


def cmd_models_upload(client: Client, args) -> int:
    path = Path(args.adapter)
    if not path.is_file():
        raise CliError(f"no such file: {args.adapter}")
    fields = {"name": args.name, "base_model": args.base}
    if args.gated:
        fields["gated"] = "true"
    body = MultipartBody(fields, "adapter", path)
    if not args.json:
        print(f"uploading {path.name} ({size_text(body.size)})…", flush=True)
    model = client.post("/api/v1/models", data=body, headers={"Content-Type": body.content_type})
    out(args, model, [f"uploaded {model['id']}  {model['name']}  base {model['base_model']}"])
    return 0


def cmd_models_list(client: Client, args) -> int:
    data = client.get("/api/v1/models/fine-tuned", params={"limit": args.limit})
    lines = [
        f"{m['id']}  {m['name']}  base {m['base_model']}"
        f"{'  (gated)' if m['gated'] else ''}  {size_text(m['adapter_size'])}"
        for m in data["results"]
    ]
    out(args, data, lines or ["no fine-tuned models"])
    return 0


def cmd_models_run(client: Client, args) -> int:
    body = {"harness": args.harness, "attempts": args.attempts, "grading": args.grading}
    run = client.post(f"/api/v1/models/{args.id}/runs", json=body)
    out(args, run, [f"launched {run['id']}  status {run['status']}  model {run['model']}"])
    return 0


def cmd_models_benchmarks(client: Client, args) -> int:
    data = client.get(f"/api/v1/models/{args.id}/benchmarks", params={"limit": args.limit})
    lines = [
        f"{r['id']}  {r['status']:<9}  score={score_text(r['score'])}  {r['harness_name']}"
        f"  {r['grading']} x {r['attempts']}"
        for r in data["results"]
    ]
    out(args, data, lines or ["no runs of this model yet"])
    return 0


def register(sub) -> None:
    models = sub.add_parser("models", help="fine-tuned models").add_subparsers(
        dest="action", required=True
    )
    upload = models.add_parser("upload", help="upload a LoRA adapter zip as a fine-tuned model")
    upload.add_argument("adapter", help="the adapter zip (adapter_config.json + weights)")
    upload.add_argument("--name", required=True, help="the model's label (results.model)")
    upload.add_argument("--base", required=True, help="the base model's Hugging Face id")
    upload.add_argument("--gated", action="store_true", help="the base model needs HF_TOKEN")
    upload.set_defaults(func=cmd_models_upload)
    listing = models.add_parser("list", help="list the project's fine-tuned models")
    listing.add_argument("--limit", type=int, default=50)
    listing.set_defaults(func=cmd_models_list)
    run = models.add_parser("run", help="benchmark a fine-tuned model on a GPU harness")
    run.add_argument("id", help="the model's id (ftm_…)")
    run.add_argument("--harness", required=True, help="a GPU harness's id")
    run.add_argument("--attempts", type=int, default=1)
    run.add_argument("--grading", default="pass@1", choices=["pass@1", "pass@k", "mean"])
    run.set_defaults(func=cmd_models_run)
    bench = models.add_parser("benchmarks", help="a fine-tuned model's runs")
    bench.add_argument("id")
    bench.add_argument("--limit", type=int, default=50)
    bench.set_defaults(func=cmd_models_benchmarks)
