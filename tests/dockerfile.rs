//! The image's Dockerfile keeps its key properties (CI also lints it with hadolint; no
//! container engine runs here to build it).

#[test]
fn dockerfile_is_multi_stage_static_non_root_binary_only() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile"))
        .expect("Dockerfile");
    let froms: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "a build stage and a final stage: {froms:?}");
    assert!(
        froms[1].contains("distroless/static"),
        "final image is distroless static: {}",
        froms[1]
    );
    let final_stage = &text[text.rfind("\nFROM ").expect("final stage")..];
    let copies: Vec<&str> = final_stage
        .lines()
        .filter(|l| l.starts_with("COPY"))
        .collect();
    assert_eq!(
        copies,
        [
            "COPY --from=build /kuota /kuota",
            "COPY --from=build /kuota /kubectl-kuota"
        ],
        "only the binary, also under kubectl's plugin name"
    );
    assert!(
        final_stage.contains("\nUSER 65532:65532"),
        "non-root, the uid the Deployment runs as"
    );
    assert!(
        !final_stage.contains("\nRUN "),
        "nothing runs in the final image"
    );
    assert!(text.contains("cargo build --locked --release --bin kuota"));
}
