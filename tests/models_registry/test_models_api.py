"""The fine-tuned models API: upload (multipart, streamed), list, read, delete; the CLI."""

import io
from pathlib import Path

import pytest

from belvedir.models import AuditEvent
from models_registry.models import FineTunedModel
from tests.helpers.adapters import adapter_zip_bytes, write_adapter_zip

pytestmark = pytest.mark.django_db


def upload(client, name="llama-lora-v1", base="meta-llama/Llama-3.1-8B", data=None, **extra):
    file = io.BytesIO(adapter_zip_bytes() if data is None else data)
    file.name = "adapter.zip"
    body = {"name": name, "base_model": base, "adapter": file, **extra}
    return client.post("/api/v1/models", body, format="multipart")


def test_an_uploaded_adapter_is_stored_through_the_storage_and_listed(owner, media_root):
    response = upload(owner.api, gated="true")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["id"].startswith("ftm_")
    assert body["name"] == "llama-lora-v1" and body["base_model"] == "meta-llama/Llama-3.1-8B"
    assert body["gated"] is True and body["adapter_size"] == len(adapter_zip_bytes())
    model = FineTunedModel.objects.get(pk=body["id"])
    stored = Path(model.adapter.path)
    assert stored.is_relative_to(media_root) and stored.read_bytes() == adapter_zip_bytes()

    listed = owner.api.get("/api/v1/models/fine-tuned").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == body["id"]
    assert owner.api.get(f"/api/v1/models/{body['id']}").json()["name"] == "llama-lora-v1"


def test_deleting_the_organization_removes_its_models_adapter_files(
    owner, django_capture_on_commit_callbacks
):
    model_id = upload(owner.api).json()["id"]
    path = Path(FineTunedModel.objects.get(pk=model_id).adapter.path)
    with django_capture_on_commit_callbacks(execute=True):
        owner.org.delete()  # the project and its models go by cascade (as from the admin)
    assert not FineTunedModel.objects.filter(pk=model_id).exists()
    assert not path.exists()


def test_deleting_a_model_removes_its_adapter_file(owner, django_capture_on_commit_callbacks):
    model_id = upload(owner.api).json()["id"]
    path = Path(FineTunedModel.objects.get(pk=model_id).adapter.path)
    assert path.exists()
    with django_capture_on_commit_callbacks(execute=True):
        assert owner.api.delete(f"/api/v1/models/{model_id}").status_code == 204
    assert not path.exists()
    assert owner.api.get(f"/api/v1/models/{model_id}").status_code == 404
    actions = AuditEvent.objects.filter(target=model_id).values_list("action", flat=True)
    assert sorted(actions) == ["model.delete", "model.upload"]


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"name": ""}, "name", "1 to 120 characters"),
        ({"name": "has space"}, "name", "1 to 120 characters"),
        ({"base": "not a model id"}, "base_model", "Hugging Face model id"),
        ({"base": "../etc/passwd"}, "base_model", "Hugging Face model id"),
        ({"data": b"definitely not a zip"}, "adapter", "not a zip file"),
    ],
    ids=["blank name", "name with a space", "base not an id", "base traversal", "not a zip"],
)
def test_bad_input_is_refused_naming_the_field(owner, fields, field, words):
    response = upload(owner.api, **fields)
    assert response.status_code == 400
    assert words in response.json()[field][0]
    assert not FineTunedModel.objects.exists()


def test_an_upload_without_the_adapter_names_the_field(owner):
    response = owner.api.post(
        "/api/v1/models", {"name": "x", "base_model": "a/b"}, format="multipart"
    )
    assert response.status_code == 400 and "adapter" in response.json()


def test_the_name_is_unique_in_a_project(owner):
    assert upload(owner.api).status_code == 201
    again = upload(owner.api)
    assert again.status_code == 400
    assert "already has a model named" in again.json()["name"][0]


def test_an_upload_over_the_limit_is_skipped_while_it_streams(owner, settings, media_root):
    settings.BELVEDIR_ADAPTER_MAX_BYTES = 8 * 1024
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024  # spooled to disk past 1 KB, as large ones are
    response = upload(owner.api, data=adapter_zip_bytes() + bytes(64 * 1024))
    assert response.status_code == 400
    assert "over the 8 KiB limit" in response.json()["adapter"][0]
    assert not FineTunedModel.objects.exists()
    assert not any(media_root.rglob("*.zip")) if media_root.exists() else True


def test_outsiders_get_404_and_read_only_members_403(owner, outsider, readonly):
    model_id = upload(owner.api).json()["id"]
    assert outsider.api.get(f"/api/v1/models/{model_id}").status_code == 404
    assert outsider.api.delete(f"/api/v1/models/{model_id}").status_code == 404
    assert outsider.api.get("/api/v1/models/fine-tuned").json()["count"] == 0
    assert readonly.api.get(f"/api/v1/models/{model_id}").status_code == 200
    assert readonly.api.delete(f"/api/v1/models/{model_id}").status_code == 403
    assert upload(readonly.api, name="other").status_code == 403


def test_get_on_the_upload_path_is_still_the_routers_openai_model_list(owner):
    # GET /api/v1/models stays the OpenAI-compatible router's (for run keys): it answers
    # OpenAI-style errors, not the REST API's.
    response = owner.api.get("/api/v1/models")
    assert response.status_code in (401, 403) and "error" in response.json()


def test_the_admin_lists_models(owner, superuser):
    upload(owner.api)
    page = superuser.get("/admin/models_registry/finetunedmodel/")
    assert page.status_code == 200 and "llama-lora-v1" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_cli_uploads_streamed_and_lists(cli, tmp_path, owner):
    zip_path = write_adapter_zip(tmp_path / "my-adapter.zip")
    code, out, err = cli(
        "models", "upload", "--name", "qwen-lora", "--base", "Qwen/Qwen2.5-7B", str(zip_path)
    )
    assert code == 0, err
    assert "uploaded ftm_" in out
    model = FineTunedModel.objects.get(name="qwen-lora")
    assert Path(model.adapter.path).read_bytes() == zip_path.read_bytes()
    code, out, _ = cli("models", "list")
    assert code == 0 and "qwen-lora  base Qwen/Qwen2.5-7B" in out
    bad = write_adapter_zip(tmp_path / "bad.zip", {"README.md": b"x"})
    code, _, err = cli("models", "upload", "--name", "bad", "--base", "a/b", str(bad))
    assert code == 1 and "adapter: The adapter zip has no adapter_config.json" in err


@pytest.mark.django_db(transaction=True)
def test_under_the_asgi_server_post_uploads_and_get_stays_the_routers(
    owner, tmp_path, monkeypatch, capsys
):
    import requests
    from django.db import connection

    from belvedir.cli import main
    from tests.router.helpers import free_port, start_uvicorn

    port = free_port()
    media = tmp_path / "asgi-media"
    process = start_uvicorn(
        upstream_base="http://127.0.0.1:9",
        database_name=connection.settings_dict["NAME"],
        port=port,
        log_path=tmp_path / "uvicorn.log",
        BELVEDIR_MEDIA_ROOT=str(media),
    )
    try:
        monkeypatch.setenv("BELVEDIR_API_KEY", owner.key)
        monkeypatch.setenv("BELVEDIR_URL", f"http://127.0.0.1:{port}")
        zip_path = write_adapter_zip(tmp_path / "asgi.zip")
        assert (
            main(["models", "upload", "--name", "asgi-lora", "--base", "a/b", str(zip_path)]) == 0
        )
        model = FineTunedModel.objects.get(name="asgi-lora")
        assert (media / model.adapter.name).read_bytes() == zip_path.read_bytes()
        listing = requests.get(
            f"http://127.0.0.1:{port}/api/v1/models",
            headers={"Authorization": f"Bearer {owner.key}"},
            timeout=30,
        )
        assert listing.status_code == 403 and "error" in listing.json()  # the router's answer
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.mark.django_db(transaction=True)
def test_under_the_asgi_server_an_upload_past_the_limit_is_stopped_as_it_arrives(owner, tmp_path):
    import requests
    from django.db import connection

    from tests.router.helpers import free_port, start_uvicorn

    port = free_port()
    media = tmp_path / "asgi-media"
    process = start_uvicorn(
        upstream_base="http://127.0.0.1:9",
        database_name=connection.settings_dict["NAME"],
        port=port,
        log_path=tmp_path / "uvicorn.log",
        BELVEDIR_MEDIA_ROOT=str(media),
        BELVEDIR_ADAPTER_MAX_BYTES="64K",
    )
    url = f"http://127.0.0.1:{port}/api/v1/models"
    auth = {"Authorization": f"Bearer {owner.key}"}
    big = adapter_zip_bytes() + bytes(3 * 2**20)  # past the limit and its 1 MiB of room
    try:
        declared = requests.post(
            url,
            headers=auth,
            files={"adapter": ("a.zip", big)},
            data={"name": "big", "base_model": "a/b"},
            timeout=30,
        )
        assert declared.status_code == 413
        assert declared.json()["code"] == "adapter_too_large"

        # Sent chunked (no length): Django would spool it whole and then read none of it.
        def chunks():
            yield big

        chunked = requests.post(
            url,
            headers={**auth, "Content-Type": "multipart/form-data; boundary=b"},
            data=chunks(),
            timeout=30,
        )
        assert chunked.status_code == 411 and chunked.json()["code"] == "length_required"
        assert not FineTunedModel.objects.exists()
    finally:
        process.terminate()
        process.wait(timeout=20)
