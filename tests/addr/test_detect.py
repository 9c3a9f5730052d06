"""Which built-in model fits a node: processor and CHA count (not cores)."""

from __future__ import annotations

from tailscope.addr.detect import identify, slice_pmus


def test_skylake_sp_with_24_chas_is_the_8160_model():
    found = identify("GenuineIntel", 6, 0x55, 24, 24)
    assert found.processor == "SKX" and found.slice_model is not None
    assert found.slice_model.name == "SKX_24-slice"
    assert "24 uncore_cha PMUs" in found.reason


def test_slices_can_outnumber_cores():
    """An 8-core Gold 6134 has 18 CHAs: the model is chosen by CHAs and the reason says so."""
    found = identify("GenuineIntel", 6, 0x55, 18, 8)
    assert found.slice_model is not None and found.slice_model.name == "SKX_18-slice"
    assert "18 slices on 8 cores per socket" in found.reason


def test_ice_lake_and_missing_models():
    assert identify("GenuineIntel", 6, 0x6A, 28).slice_model.name == "ICX_28-slice"
    missing = identify("GenuineIntel", 6, 0x6A, 40)
    assert missing.slice_model is None and "ICX with 40 CHAs has no built-in model" in missing.reason
    assert "ICX_28-slice" in missing.reason and "tailscope addr measure" in missing.reason


def test_unknown_processor_and_no_pmus():
    amd = identify("AuthenticAMD", 25, 1, 8)
    assert amd.slice_model is None and "only Intel's CHA slice hashes are modelled" in amd.reason
    new = identify("GenuineIntel", 6, 0xAD, 43)
    assert new.slice_model is None and "not a processor with published slice-hash tables" in new.reason
    vm = identify("GenuineIntel", 6, 0x55, 0)
    assert vm.slice_model is None and "no uncore CHA PMUs" in vm.reason


def test_cbox_pmus_count_when_there_are_no_chas(tmp_path):
    for i in range(4):
        d = tmp_path / f"uncore_cbox_{i}"
        d.mkdir()
        (d / "type").write_text(f"{20 + i}\n")
    (tmp_path / "uncore_cbox_x").mkdir()  # not a numbered box
    (tmp_path / "uncore_cha_9").mkdir()  # no type file: unreadable, ignored
    assert [p.index for p in slice_pmus(tmp_path)] == [0, 1, 2, 3]
    assert slice_pmus(tmp_path / "absent") == []
