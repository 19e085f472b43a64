//! Holds a running node's answers to `docs/openapi.json`: the operation a request hits, the
//! response its status is filed under, and a JSON Schema check of the body — the subset of
//! JSON Schema 2020-12 the document uses (`$ref`, `type`, `properties`, `required`, `items`,
//! `enum`, `const`, `oneOf`, `anyOf`, `allOf`, `minimum`, `maximum`, `minLength`,
//! `additionalProperties`).
//!
//! An object is closed: a property the schema does not name (itself, or through its `$ref`
//! and `allOf`) is an error, so that an answer cannot carry a field the document does not
//! describe.

use std::path::PathBuf;

use serde_json::Value;

/// The OpenAPI document of the admin API.
#[derive(Debug, Clone)]
pub struct OpenApi {
    document: Value,
}

/// Where `docs/openapi.json` is.
pub fn openapi_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json")
}

impl OpenApi {
    /// `docs/openapi.json` as committed.
    pub fn load() -> Self {
        let text = std::fs::read_to_string(openapi_path())
            .unwrap_or_else(|err| panic!("reading {}: {err}", openapi_path().display()));
        Self::from_value(
            serde_json::from_str(&text).unwrap_or_else(|err| panic!("docs/openapi.json: {err}")),
        )
    }

    /// A document given as JSON.
    pub fn from_value(document: Value) -> Self {
        Self { document }
    }

    /// The path template of the document that `path` (without its query) falls under:
    /// `{key}` takes the rest of the path, `{id}` one segment.
    pub fn template_of(&self, path: &str) -> Option<String> {
        let paths = self.document["paths"].as_object()?;
        if paths.contains_key(path) {
            return Some(path.to_owned());
        }
        paths
            .keys()
            .find(|template| template_matches(template, path))
            .cloned()
    }

    /// Checks an answer: `method path` is an operation of the document, `status` one of its
    /// responses, and `body` (JSON, or one server-sent event's data with `content_type`
    /// `text/event-stream`) fits that response's schema. An unknown path must be a
    /// `no_such_endpoint` error, which fits the error schema.
    pub fn check_answer(
        &self,
        method: &str,
        path: &str,
        status: u16,
        content_type: &str,
        body: &Value,
    ) -> Result<(), String> {
        let Some(template) = self.template_of(path) else {
            if status == 404 && body["error"] == "no_such_endpoint" {
                return self.check_schema(&self.error_schema(), body, "no_such_endpoint");
            }
            return Err(format!(
                "{method} {path} is no path of the document ({status})"
            ));
        };
        let item = &self.document["paths"][&template];
        let operation = &item[method.to_ascii_lowercase()];
        if operation.is_null() {
            if status == 405 && body["error"] == "method_not_allowed" {
                return self.check_schema(&self.error_schema(), body, "method_not_allowed");
            }
            return Err(format!(
                "{method} {template} is no operation of the document"
            ));
        }
        let response = &operation["responses"][status.to_string()];
        if response.is_null() {
            return Err(format!(
                "{method} {template} does not document status {status} (answer {body})"
            ));
        }
        let media = content_type.split(';').next().unwrap_or("").trim();
        let schema = &response["content"][media]["schema"];
        if schema.is_null() {
            return Err(format!(
                "{method} {template} {status} does not document a {media} answer"
            ));
        }
        if let Some(code) = body["error"].as_str() {
            let described = response["description"].as_str().unwrap_or("");
            if !described.contains(code) {
                return Err(format!(
                    "{method} {template} {status}: error code {code} is not documented there \
                     ({described})"
                ));
            }
        }
        self.check_schema(schema, body, &format!("{method} {template} {status}"))
    }

    /// Checks that `method path` documents a `status` answer of the non-JSON type `media` (a
    /// binary body, which no schema describes byte by byte).
    pub fn check_media(
        &self,
        method: &str,
        path: &str,
        status: u16,
        media: &str,
    ) -> Result<(), String> {
        let template = self
            .template_of(path)
            .ok_or_else(|| format!("{method} {path} is no path of the document"))?;
        let response = &self.document["paths"][&template][method.to_ascii_lowercase()]["responses"]
            [status.to_string()];
        if response["content"][media].is_null() {
            return Err(format!(
                "{method} {template} {status} does not document a {media} answer"
            ));
        }
        Ok(())
    }

    /// Checks a request body against the operation's request schema.
    pub fn check_request(&self, method: &str, path: &str, body: &Value) -> Result<(), String> {
        let template = self
            .template_of(path)
            .ok_or_else(|| format!("{method} {path} is no path of the document"))?;
        let schema = &self.document["paths"][&template][method.to_ascii_lowercase()]["requestBody"]
            ["content"]["application/json"]["schema"];
        if schema.is_null() {
            return Err(format!("{method} {template} takes no JSON body"));
        }
        self.check_schema(schema, body, &format!("request of {method} {template}"))
    }

    fn error_schema(&self) -> Value {
        serde_json::json!({"$ref": "#/components/schemas/ErrorAnswer"})
    }

    /// Checks `value` against `schema`, naming `what` in the error.
    pub fn check_schema(&self, schema: &Value, value: &Value, what: &str) -> Result<(), String> {
        self.validate(schema, value, "$")
            .map_err(|error| format!("{what}: {error}\nin {value}"))
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let name = reference
                    .strip_prefix("#/components/schemas/")
                    .unwrap_or(reference);
                &self.document["components"]["schemas"][name]
            }
            None => schema,
        }
    }

    fn validate(&self, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
        self.validate_within(schema, value, at, &[])
    }

    /// Checks `value` against `schema`, where the enclosing schema names `inherited` (the
    /// properties beside a `$ref`, or around a `oneOf`), which the closed-object rule allows.
    fn validate_within(
        &self,
        schema: &Value,
        value: &Value,
        at: &str,
        inherited: &[String],
    ) -> Result<(), String> {
        let mut allowed: Vec<String> = inherited.to_vec();
        allowed.extend(self.property_names(schema));
        if let Some(reference) = schema.get("$ref") {
            let target = self.resolve(schema);
            if target.is_null() {
                return Err(format!("{at}: unresolved reference {reference}"));
            }
            self.validate_within(target, value, at, &allowed)?;
        }
        self.validate_keywords(schema, value, at, &allowed)?;
        // The schema that holds the value whole says which properties it may have: not one
        // that only points elsewhere or only branches (those check, with these names allowed).
        let delegates = schema.get("$ref").is_some()
            || schema.get("oneOf").is_some()
            || schema.get("anyOf").is_some();
        if let (Some(object), false) = (value.as_object(), delegates) {
            let closed = !allowed.is_empty()
                && !schema
                    .get("additionalProperties")
                    .is_some_and(|extra| extra != false);
            if closed {
                for name in object.keys() {
                    if !allowed.contains(name) {
                        return Err(format!("{at}: property {name:?} is not in the schema"));
                    }
                }
            }
        }
        Ok(())
    }

    /// The properties a schema names, through `$ref` and `allOf`.
    fn property_names(&self, schema: &Value) -> Vec<String> {
        let mut names: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        if schema.get("$ref").is_some() {
            names.extend(self.property_names(self.resolve(schema)));
        }
        for part in schema
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            names.extend(self.property_names(part));
        }
        names
    }

    /// Every keyword of `schema` but `$ref` and the closed-object rule.
    fn validate_keywords(
        &self,
        schema: &Value,
        value: &Value,
        at: &str,
        allowed: &[String],
    ) -> Result<(), String> {
        if let Some(types) = schema.get("type") {
            let kinds: Vec<&str> = match types {
                Value::String(one) => vec![one.as_str()],
                Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !kinds.iter().any(|kind| is_of_type(value, kind)) {
                return Err(format!("{at}: {value} is not of type {types}"));
            }
        }
        if let Some(constant) = schema.get("const") {
            if constant != value {
                return Err(format!("{at}: {value} is not {constant}"));
            }
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array) {
            if !options.contains(value) {
                return Err(format!("{at}: {value} is none of {options:?}"));
            }
        }
        if let (Some(minimum), Some(number)) = (schema.get("minimum"), value.as_f64()) {
            if minimum.as_f64().is_some_and(|minimum| number < minimum) {
                return Err(format!("{at}: {number} is below {minimum}"));
            }
        }
        if let (Some(maximum), Some(number)) = (schema.get("maximum"), value.as_f64()) {
            if maximum.as_f64().is_some_and(|maximum| number > maximum) {
                return Err(format!("{at}: {number} is above {maximum}"));
            }
        }
        if let (Some(least), Some(text)) = (schema.get("minLength"), value.as_str()) {
            if least
                .as_u64()
                .is_some_and(|least| (text.chars().count() as u64) < least)
            {
                return Err(format!("{at}: {text:?} is shorter than {least}"));
            }
        }
        if let Some(object) = value.as_object() {
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !object.contains_key(name) {
                    return Err(format!("{at}: required property {name:?} is missing"));
                }
            }
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if let Some(field) = object.get(name) {
                        self.validate(property, field, &format!("{at}.{name}"))?;
                    }
                }
            }
            if let Some(extra) = schema.get("additionalProperties").filter(|e| e.is_object()) {
                let named = self.property_names(schema);
                for (name, field) in object {
                    if !named.contains(name) {
                        self.validate(extra, field, &format!("{at}.{name}"))?;
                    }
                }
            }
        }
        if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
            for (index, item) in array.iter().enumerate() {
                self.validate(items, item, &format!("{at}[{index}]"))?;
            }
        }
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            for part in parts {
                self.validate_keywords(self.resolve(part), value, at, allowed)?;
            }
        }
        if let Some(options) = schema.get("anyOf").and_then(Value::as_array) {
            if !options
                .iter()
                .any(|option| self.validate_within(option, value, at, allowed).is_ok())
            {
                return Err(format!("{at}: {value} fits none of anyOf"));
            }
        }
        if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
            let results: Vec<Result<(), String>> = options
                .iter()
                .map(|option| self.validate_within(option, value, at, allowed))
                .collect();
            let fitting = results.iter().filter(|result| result.is_ok()).count();
            if fitting != 1 {
                let errors: Vec<String> = results.into_iter().filter_map(Result::err).collect();
                return Err(format!(
                    "{at}: {value} fits {fitting} of oneOf, not exactly one ({})",
                    errors.join("; ")
                ));
            }
        }
        Ok(())
    }
}

fn is_of_type(value: &Value, kind: &str) -> bool {
    match kind {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// Whether `path` falls under `template`.
fn template_matches(template: &str, path: &str) -> bool {
    let mut parts = template.split('/');
    let mut segments = path.split('/');
    loop {
        match (parts.next(), segments.next()) {
            (None, None) => return true,
            (Some("{key}"), Some(_)) => return parts.next().is_none(),
            (Some(part), Some(segment)) if part.starts_with('{') => {
                if segment.is_empty() {
                    return false;
                }
                let _ = part;
            }
            (Some(part), Some(segment)) if part == segment => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_match_their_paths() {
        assert!(template_matches("/v1/kv/{key}", "/v1/kv/a/b c"));
        assert!(template_matches("/v1/jobs/{id}/ack", "/v1/jobs/7/ack"));
        assert!(!template_matches("/v1/jobs/{id}/ack", "/v1/jobs/7"));
        assert!(!template_matches("/v1/kv", "/v1/kv/a"));
    }

    /// A closed object refuses a property it does not name, and a `$ref` with sibling
    /// properties (an internally tagged variant) names both.
    #[test]
    fn objects_are_closed() {
        let api = OpenApi::from_value(json!({"components": {"schemas": {
            "Inner": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        }}}));
        let tagged = json!({"$ref": "#/components/schemas/Inner",
            "properties": {"kind": {"const": "x"}}, "required": ["kind"]});
        assert!(
            api.check_schema(&tagged, &json!({"a": 1, "kind": "x"}), "t")
                .is_ok()
        );
        assert!(
            api.check_schema(&tagged, &json!({"a": 1, "kind": "y"}), "t")
                .is_err()
        );
        assert!(
            api.check_schema(&tagged, &json!({"a": 1, "kind": "x", "b": 2}), "t")
                .is_err()
        );
        assert!(
            api.check_schema(&tagged, &json!({"kind": "x"}), "t")
                .is_err()
        );
    }
}
