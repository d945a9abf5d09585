"""The Node SDK served for outside harnesses: GET /sdk/node/belvedir.tgz is npm pack's package
of the committed sdk/node, installable with npm (issue 26, item 3)."""

import gzip
import io
import shutil
import subprocess
import tarfile

import pytest

from belvedir import sdk_package

NPM = shutil.which("npm")


def members(tgz: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_the_package_is_served_without_a_login_as_gzip(client, db):
    response = client.get("/sdk/node/belvedir.tgz")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    assert response["Content-Disposition"] == 'attachment; filename="belvedir.tgz"'
    body = response.content
    assert int(response["Content-Length"]) == len(body) < sdk_package.MAX_BYTES
    files = members(body)
    assert {
        "package/package.json",
        "package/dist/esm/index.js",
        "package/dist/cjs/index.js",
    } <= set(files)
    assert b'"name": "belvedir"' in files["package/package.json"]
    assert client.post("/sdk/node/belvedir.tgz").status_code == 405
    again = client.get("/sdk/node/belvedir.tgz", HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304


def test_two_packs_of_one_tree_are_the_same_bytes():
    root = sdk_package.package_root()
    assert sdk_package.pack(root) == sdk_package.pack(root)
    assert gzip.decompress(sdk_package.pack(root))  # a plain gzip stream


def test_a_package_over_the_limit_is_refused_not_served():
    with pytest.raises(sdk_package.PackageTooLarge):
        sdk_package.pack(sdk_package.package_root(), max_bytes=1000)


def test_it_holds_what_npm_pack_makes_of_sdk_node(tmp_path):
    assert NPM, "no npm on PATH: the machine's Node.js comes with it (make test runs make sdk-node)"
    root = sdk_package.package_root()
    subprocess.run(
        [NPM, "pack", "--pack-destination", str(tmp_path), "--loglevel=error"],
        cwd=root,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (npm_tgz,) = tmp_path.glob("belvedir-*.tgz")
    assert members(sdk_package.pack(root)) == members(npm_tgz.read_bytes())


def test_the_served_package_loads_from_esm_and_commonjs(client, db, tmp_path):
    """Unpacked as npm installs it, next to the lockfile's tree (make sdk-node's npm ci)."""
    deps = sdk_package.package_root() / "node_modules"
    if not deps.is_dir():
        pytest.fail("sdk/node/node_modules is missing: make test runs make sdk-node")
    modules = tmp_path / "node_modules"
    modules.mkdir()
    for dep in deps.iterdir():
        if not dep.name.startswith("."):
            (modules / dep.name).symlink_to(dep)
    for name, data in members(client.get("/sdk/node/belvedir.tgz").content).items():
        path = modules / "belvedir" / name.removeprefix("package/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    show = "console.log(typeof m.initialize, typeof m.withSession, typeof m.flush)"
    for args in (
        ["-e", f'const m = require("belvedir"); {show}'],
        ["--input-type=module", "-e", f'import * as m from "belvedir"; {show}'],
    ):
        ran = subprocess.run(
            ["node", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert ran.stdout.strip() == "function function function", ran.stderr
