"""FIELD_ENCRYPTION_KEY rotation: old keys decrypt, new writes use the first key, a command
re-encrypts every encrypted field."""

import pytest
from django.core.management import CommandError, call_command

from belvedir import crypto
from harnesses import env_secrets
from harnesses.models import Harness
from runs.models import Run

OLD = "old-field-key-" + "o" * 30
NEW = "new-field-key-" + "n" * 30


def test_a_token_written_under_the_old_key_decrypts_once_a_new_key_comes_first(settings):
    settings.FIELD_ENCRYPTION_KEYS = [OLD]
    token = crypto.encrypt("sk-model-key")
    settings.FIELD_ENCRYPTION_KEYS = [NEW, OLD]
    assert crypto.decrypt(token) == "sk-model-key"
    fresh = crypto.encrypt("sk-model-key")
    settings.FIELD_ENCRYPTION_KEYS = [NEW]
    assert crypto.decrypt(fresh) == "sk-model-key", "new writes do not use the first key"
    with pytest.raises(ValueError):
        crypto.decrypt(token)


def test_the_reencrypt_command_moves_every_encrypted_field_to_the_current_key(
    settings, owner, harness
):
    settings.FIELD_ENCRYPTION_KEYS = [OLD]
    Harness.objects.filter(pk=harness.pk).update(
        env_secrets_encrypted=env_secrets.secrets_encrypt({"HF_TOKEN": "hf_abc"})
    )
    run = Run.objects.create(
        project=owner.project,
        harness_name="x",
        model_api_key_encrypted=crypto.encrypt("sk-model"),
        run_key_encrypted=crypto.encrypt("bv_live_run"),
    )
    settings.FIELD_ENCRYPTION_KEYS = [NEW, OLD]
    call_command("reencrypt_fields", stdout=open("/dev/null", "w"))
    settings.FIELD_ENCRYPTION_KEYS = [NEW]  # the old key is gone: everything still reads
    harness.refresh_from_db()
    run.refresh_from_db()
    assert env_secrets.secrets_decrypt(harness.env_secrets_encrypted) == {"HF_TOKEN": "hf_abc"}
    assert crypto.decrypt(run.model_api_key_encrypted) == "sk-model"
    assert crypto.decrypt(run.run_key_encrypted) == "bv_live_run"
    assert run.judge_api_key_encrypted == ""


def test_the_reencrypt_command_stops_on_a_value_no_key_decrypts(settings, owner):
    settings.FIELD_ENCRYPTION_KEYS = [OLD]
    Run.objects.create(
        project=owner.project, harness_name="x", model_api_key_encrypted=crypto.encrypt("k")
    )
    settings.FIELD_ENCRYPTION_KEYS = [NEW]
    with pytest.raises(CommandError, match="cannot be decrypted"):
        call_command("reencrypt_fields", stdout=open("/dev/null", "w"))


def test_several_comma_separated_keys_are_read_from_the_environment():
    import subprocess
    import sys

    code = "from django.conf import settings; print(settings.FIELD_ENCRYPTION_KEYS)"
    done = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        env={
            **__import__("os").environ,
            "DJANGO_SETTINGS_MODULE": "belvedir.settings",
            "FIELD_ENCRYPTION_KEY": f"{NEW}, {OLD}",
        },
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr([NEW, OLD])
