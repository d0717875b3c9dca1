"""Zip bombs and lying sizes in `.xlc` files: names and declared sizes are checked before any
member is decompressed, and members are streamed with their declared size as a cap."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

import xlc
from tests.test_artifact import SMALL_HLO
from xlc.artifact.manifest import HLO_MEMBER


# ---- zip bombs: sizes are checked before anything is decompressed ---------------------------
def _forge(dst: Path, payload: bytes, manifest_size: int | None = None,
           zip_size: int | None = None) -> Path:
    """An interpreter `.xlc` of SMALL_HLO whose optimized.hlo is `payload` (deflated), with a
    consistent, resealed manifest that declares `manifest_size` bytes for it (default: its
    real size) and a zip directory that declares `zip_size` (default: the real size)."""
    import hashlib
    import struct

    from xlc.artifact.manifest import seal

    src = dst.with_suffix(".src.xlc")
    xlc.compile(SMALL_HLO, backend="interpreter").serialize(str(src))
    with zipfile.ZipFile(src) as z:
        items = {n: z.read(n) for n in z.namelist()}
    items[HLO_MEMBER] = payload
    m = json.loads(items["manifest.json"])
    m["members"][HLO_MEMBER] = {"sha256": hashlib.sha256(payload).hexdigest(),
                                "size": len(payload) if manifest_size is None else manifest_size}
    items["manifest.json"] = json.dumps(m).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.comment = seal(items["manifest.json"])
        for n, data in items.items():
            z.writestr(n, data)
    raw = bytearray(buf.getvalue())
    if zip_size is not None:  # patch the central directory's uncompressed size
        at = raw.index(b"PK\x01\x02")
        while raw[at + 46:at + 46 + len(HLO_MEMBER)] != HLO_MEMBER.encode():
            at = raw.index(b"PK\x01\x02", at + 4)
        struct.pack_into("<I", raw, at + 24, zip_size)
    dst.write_bytes(bytes(raw))
    return dst


def test_a_zip_bomb_is_refused_before_decompression(tmp_path: Path, monkeypatch):
    bomb = _forge(tmp_path / "bomb.xlc", bytes(16 << 20))  # 16 MiB of zeros, ~16 KB on disk
    assert bomb.stat().st_size < 100_000
    with zipfile.ZipFile(bomb) as z:
        total = sum(v["size"] for v in json.loads(z.read("manifest.json"))["members"].values())
    opened: list[str] = []
    real_open = zipfile.ZipFile.open

    def recording_open(self, name, *a, **k):
        opened.append(name if isinstance(name, str) else name.filename)
        return real_open(self, name, *a, **k)

    monkeypatch.setattr(zipfile.ZipFile, "open", recording_open)
    with pytest.raises(xlc.ArtifactError) as e:
        xlc.load(str(bomb), max_bytes=4 << 20)
    assert str(e.value) == (
        f"{bomb}: the members declare {total} bytes uncompressed ({HLO_MEMBER}: "
        f"{16 << 20}), over the limit of {4 << 20} bytes; refusing to decompress it (a file "
        "you trust can be loaded with a larger max_bytes)")
    assert opened == ["manifest.json"]  # nothing else was decompressed


def test_declared_sizes_over_the_default_limit_and_lies_are_refused(tmp_path: Path, capsys):
    from xlc.artifact.archive import MAX_ARCHIVE_BYTES
    from xlc.cli import main

    # 3 GiB declared in the manifest and in the zip directory: `xlc inspect` refuses unread
    big = _forge(tmp_path / "big.xlc", b"HloModule x", manifest_size=3 << 30, zip_size=3 << 30)
    assert main(["inspect", str(big)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"xlc inspect: error: {big}: the members declare ")
    assert err.endswith(f"({HLO_MEMBER}: {3 << 30}), over the limit of {MAX_ARCHIVE_BYTES} "
                        "bytes; refusing to decompress it (a file you trust can be loaded "
                        "with a larger max_bytes)\n")
    # the zip directory and the manifest disagree
    lie = _forge(tmp_path / "lie.xlc", bytes(1 << 20), zip_size=100)
    with pytest.raises(xlc.ArtifactError, match=rf"lie.xlc: member {HLO_MEMBER} is 100 bytes "
                       rf"uncompressed in the zip but {1 << 20} in the manifest; the file was "
                       "modified or damaged, refusing to load it"):
        xlc.load(str(lie))
    # both say 100 bytes, the data inflates to 1 MiB: streaming stops at the declared size
    both = _forge(tmp_path / "both.xlc", bytes(1 << 20), manifest_size=100, zip_size=100)
    with pytest.raises(xlc.ArtifactError, match=r"both.xlc: the file is corrupted \(Bad CRC"):
        xlc.load(str(both))


def test_an_unknown_compression_method_is_a_corrupted_file(tmp_path: Path):
    """zipfile raises NotImplementedError for a member whose compression method it lacks
    (here method 99 patched into both headers): `xlc.load` refuses the file as corrupted."""
    import struct

    path = _forge(tmp_path / "method.xlc", b"HloModule x")
    raw = bytearray(path.read_bytes())
    for sig, method_at, name_at in ((b"PK\x03\x04", 8, 30), (b"PK\x01\x02", 10, 46)):
        at = raw.index(sig)
        while raw[at + name_at:at + name_at + len(HLO_MEMBER)] != HLO_MEMBER.encode():
            at = raw.index(sig, at + 4)
        struct.pack_into("<H", raw, at + method_at, 99)
    path.write_bytes(bytes(raw))
    with pytest.raises(xlc.ArtifactError, match=r"method.xlc: the file is corrupted \(That "
                       r"compression method is not supported\)"):
        xlc.load(str(path))
