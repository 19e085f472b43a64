//! `docs/openapi.json` is the OpenAPI document conclave-api builds from its types: a change
//! of a request or answer type that the file does not show fails here. After a deliberate
//! change, write the file anew with `CONCLAVE_WRITE_OPENAPI=1 cargo test -p conclave-tests
//! --test openapi`.

use conclave_tests::openapi_check::openapi_path;

#[test]
fn docs_openapi_json_is_the_document_the_types_give() {
    let document = conclave_api::openapi::document();
    let text = format!(
        "{}\n",
        serde_json::to_string_pretty(&document).expect("the document is JSON")
    );
    let path = openapi_path();
    if std::env::var_os("CONCLAVE_WRITE_OPENAPI").is_some() {
        std::fs::write(&path, &text).expect("docs/openapi.json is writable");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "docs/openapi.json differs from the document the API's types give; write it anew with \
         CONCLAVE_WRITE_OPENAPI=1 cargo test -p conclave-tests --test openapi"
    );
}
