"""The HTTP client the commands share, and the one error type they raise."""

import json

import requests

DEFAULT_URL = "http://127.0.0.1:8000"


class CliError(Exception):
    """Something the user should read: printed as `belvedir: <message>`, exit code 1."""


class Client:
    def __init__(self, url: str, key: str, timeout: float = 30):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"
        self.timeout = timeout

    def request(self, method: str, path: str, **kwargs):
        try:
            response = self.session.request(method, self.url + path, timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            raise CliError(f"cannot reach {self.url}: {exc.__class__.__name__}") from None
        if response.status_code >= 400:
            raise CliError(error_text(response))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def download(self, path: str, target, **kwargs) -> int:
        """GET `path` and stream the body into the open binary file `target`; returns bytes."""
        try:
            with self.session.get(
                self.url + path, timeout=self.timeout, stream=True, **kwargs
            ) as response:
                if response.status_code >= 400:
                    raise CliError(error_text(response))
                size = 0
                for chunk in response.iter_content(chunk_size=65536):
                    target.write(chunk)
                    size += len(chunk)
                return size
        except requests.RequestException as exc:
            raise CliError(f"cannot reach {self.url}: {exc.__class__.__name__}") from None

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw):
        return self.request("POST", path, **kw)


def error_text(response) -> str:
    """An API error body (`{"field": ["message"]}` or `{"detail": ...}`) as one line."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    if isinstance(body, dict):
        parts = []
        for field, errors in body.items():
            errors = errors if isinstance(errors, list) else [errors]
            text = "; ".join(str(e) for e in errors)
            parts.append(text if field == "detail" else f"{field}: {text}")
        return f"HTTP {response.status_code}: " + " | ".join(parts)
    return f"HTTP {response.status_code}: {body}"


def out(args, data, text_lines) -> None:
    """Print `data` as JSON with `--json`, else the text lines."""
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        for line in text_lines:
            print(line)
