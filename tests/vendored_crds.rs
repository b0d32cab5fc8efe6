//! The job CRDs vendored under `tests/fixtures/crds` are the upstream files, unchanged:
//! each file's git blob id matches the one `PROVENANCE.md` recorded at its release tag.

use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crds")
}

/// Git's blob id of a file's bytes: SHA-1 of `blob <length>\0<bytes>`.
fn git_blob_id(bytes: &[u8]) -> String {
    use sha1::Digest;
    let mut h = sha1::Sha1::new();
    h.update(format!("blob {}\0", bytes.len()).as_bytes());
    h.update(bytes);
    format!("{:x}", h.finalize())
}

/// (file, blob id) of every row of the provenance table.
fn recorded() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dir().join("PROVENANCE.md")).expect("PROVENANCE.md");
    text.lines()
        .filter(|l| l.starts_with("| ") && l.contains(".yaml"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            // "", file, repository, tag, commit, path, blob, ""
            assert_eq!(cells.len(), 8, "a provenance row has six cells: {l}");
            (cells[1].to_string(), cells[6].to_string())
        })
        .collect()
}

#[test]
fn every_vendored_crd_is_the_upstream_file_unchanged() {
    let rows = recorded();
    let mut on_disk: Vec<String> = std::fs::read_dir(dir())
        .expect("the CRD directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = rows.iter().map(|(f, _)| f.clone()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "every vendored file has a provenance row, and only those"
    );
    for (file, blob) in rows {
        let bytes = std::fs::read(dir().join(&file)).expect("a vendored CRD");
        assert_eq!(git_blob_id(&bytes), blob, "{file} differs from upstream");
    }
}

#[test]
fn the_blob_id_is_gits() {
    // `printf 'hello\n' | git hash-object --stdin`
    assert_eq!(
        git_blob_id(b"hello\n"),
        "ce013625030ba8dba906f756967f9e9ca394464a"
    );
}
