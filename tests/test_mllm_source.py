"""The hub source of the multimodal ProactiveBench without the hub: the chosen datasets' files
(an archive and an entry file) come from a stand-in for huggingface_hub, are extracted once into
the cache, and a second look downloads nothing; an archive that fails to extract leaves nothing
behind."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from mllm_corpus import generate_corpus

from proactflow.common.errors import UserError
from proactflow.suites.proactivebench_mllm import source
from proactflow.suites.proactivebench_mllm.corpus import read_corpus
from proactflow.suites.proactivebench_mllm.datasets import BY_SHORT

COMMIT = "c0ffee" * 6 + "abcd"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    generate_corpus(tmp_path / "made", per_dataset=3)
    files = tmp_path / "hub"
    files.mkdir()
    with tarfile.open(files / "Realistic-Occlusion-Dataset_test.tar.gz", "w:gz") as archive:
        archive.add(tmp_path / "made" / "ROD", arcname="ROD")
    (files / "QuickDraw_test.tar").write_bytes(b"")
    with tarfile.open(files / "QuickDraw_test.tar", "w") as archive:
        archive.add(tmp_path / "made" / "QD", arcname="QD")
    for name in ("Realistic-Occlusion-Dataset", "QuickDraw"):
        (files / f"{name}_preprocessed.jsonl").write_bytes(
            (tmp_path / "made" / f"{name}_preprocessed.jsonl").read_bytes())
    names = sorted(path.name for path in files.iterdir()) + ["coco2014_test.zip", "README.md"]
    downloads: list[str] = []

    def download(repo, name, repo_type, revision):
        assert (repo, repo_type, revision) == (source.HUB_REPO, "dataset", COMMIT)
        downloads.append(name)
        return str(files / name)

    monkeypatch.setattr(source, "_hub_files", lambda revision: (COMMIT, names))
    monkeypatch.setattr("huggingface_hub.hf_hub_download", download)
    return tmp_path / "made", downloads


def test_the_chosen_datasets_are_extracted_once(hub, tmp_path):
    made, downloads = hub
    chosen = (BY_SHORT["ROD"], BY_SHORT["QD"])
    folder, revision = source.hub_corpus(tmp_path / "cache", chosen, None)
    assert revision == f"{source.HUB_REPO}@{COMMIT}"
    assert sorted(downloads) == ["QuickDraw_preprocessed.jsonl", "QuickDraw_test.tar",
                                 "Realistic-Occlusion-Dataset_preprocessed.jsonl",
                                 "Realistic-Occlusion-Dataset_test.tar.gz"]  # not COCO's
    assert read_corpus(folder, chosen) == read_corpus(made, chosen)
    for image in (made / "ROD").rglob("*.png"):
        assert (folder / image.relative_to(made)).read_bytes() == image.read_bytes()
    assert not list(folder.glob(".extracting-*"))
    downloads.clear()
    assert source.hub_corpus(tmp_path / "cache", chosen, None)[0] == folder
    assert downloads == []


def test_a_failed_extraction_leaves_nothing(hub, tmp_path):
    _, downloads = hub
    bad = tmp_path / "hub" / "QuickDraw_test.tar"
    bad.write_bytes(b"not a tar file")
    with pytest.raises(UserError, match="cannot extract QuickDraw_test.tar"):
        source.hub_corpus(tmp_path / "cache", (BY_SHORT["QD"],), None)
    root = tmp_path / "cache" / "proactivebench-mllm" / COMMIT
    assert [path.name for path in root.iterdir()] == []
    assert not Path(root / ".extracted" / "QD").exists()


def test_a_corpus_folder_gets_a_new_revision_when_an_image_is_replaced(tmp_path):
    """Stored results are not reused for a corpus whose images changed; a corpus moved to
    another folder keeps its revision."""
    generate_corpus(tmp_path / "corpus", per_dataset=2)
    datasets = (BY_SHORT["ROD"],)
    before = source.folder_revision(tmp_path / "corpus", datasets)
    moved = tmp_path / "elsewhere"
    (tmp_path / "corpus").rename(moved)
    assert source.folder_revision(moved, datasets) == before
    image = next(path for path in (moved / "ROD").rglob("*") if path.is_file())
    image.write_bytes(image.read_bytes() + b"\0")  # another image, another size
    assert source.folder_revision(moved, datasets) != before


def test_a_corpus_folder_has_one_revision_whatever_datasets_are_chosen(tmp_path):
    """Runs of one folder on ROD alone and on every dataset share its revision: filtering by
    revision does not split them (the selection is a key setting of its own)."""
    generate_corpus(tmp_path / "corpus", per_dataset=2)
    alone = source.folder_revision(tmp_path / "corpus", (BY_SHORT["ROD"],))
    assert source.folder_revision(tmp_path / "corpus", tuple(BY_SHORT.values())) == alone
    (tmp_path / "corpus" / BY_SHORT["QD"].file_name).unlink()
    with pytest.raises(UserError, match="QuickDraw|does not exist"):
        source.folder_revision(tmp_path / "corpus", (BY_SHORT["QD"],))


def test_datasets_whose_archives_share_a_top_folder_both_stay(hub, tmp_path):
    """Two datasets extracted one after the other into a shared top folder: the second adds to
    it, never replaces it."""
    made, _ = hub
    files = tmp_path / "hub"
    for archive_name, short in (("Realistic-Occlusion-Dataset_test.tar.gz", "ROD"),
                                ("QuickDraw_test.tar", "QD")):
        with tarfile.open(files / archive_name, "w:gz" if archive_name.endswith("gz") else "w") \
                as archive:
            archive.add(made / short, arcname=f"images/{short}")
    cache = tmp_path / "cache"
    source.hub_corpus(cache, (BY_SHORT["ROD"],), None)
    folder, _ = source.hub_corpus(cache, (BY_SHORT["QD"],), None)
    assert list((folder / "images" / "ROD").rglob("*.png")) and \
        list((folder / "images" / "QD").rglob("*.png"))
