//! Every key of docs/design.md §9 with its type, and the checks each layer (defaults, file,
//! environment) passes before the layers are merged.
//!
//! `#[serde(deny_unknown_fields)]` stops at the first unknown field and a type mismatch stops
//! deserialization altogether; checking each layer against [`KEYS`] first instead reports
//! every unknown key and every mistyped value with its full key, and leaves them out, so the
//! layer below supplies the value and the remaining keys can still be validated. [`KEYS`] is
//! not written by hand: it is read off the serde structs themselves, which [`sections!`]
//! declares, so the table and the structs cannot disagree (issue 9, item 7). The same
//! declarations write the defaults file ([`DefaultsFile`]): each key's default and doc line.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::LazyLock;

use config::{Map, Value, ValueKind};

use super::{ConfigProblem, parse_toml};

/// Prefix of the environment variables that set keys: `CONCLAVE__NODE__ID`.
pub const ENV_PREFIX: &str = "CONCLAVE__";
/// Separator between the parts of a key path in an environment variable name.
pub const ENV_SEPARATOR: &str = "__";

/// The type a key's value must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A table of further keys.
    Section,
    /// A string.
    Text,
    /// A non-negative integer.
    Number,
    /// A boolean.
    Switch,
    /// An array of strings.
    TextList,
    /// An array whose items are strings or arrays of strings.
    CommandList,
    /// One command: a string, or an array of strings.
    Command,
}

/// The keys [`super::Settings`] reads, sections included, in the order of the fields: derived
/// from the section structs themselves (declared with [`sections!`]), so a key cannot be
/// added, renamed or retyped in one place and forgotten in another.
pub(super) static KEYS: LazyLock<Vec<(String, Kind)>> = LazyLock::new(|| {
    let mut keys = Vec::new();
    <super::Settings as Schema>::describe(None, &mut keys);
    keys
});

/// A type that can be the value of a key: it names its [`Kind`], a section its keys, and it
/// writes itself into the defaults file.
pub(super) trait Schema {
    /// Whether this is a section (a TOML table of keys), written under a header.
    const SECTION: bool = false;

    /// Appends `key` (absent: the top level) with its kind, and for a section every key
    /// inside it, to `out`.
    fn describe(key: Option<&str>, out: &mut Vec<(String, Kind)>);

    /// Writes this value as the value of `key` (absent: the top level) to the defaults file,
    /// with the key's doc lines.
    fn render(&self, key: Option<&str>, docs: &[&str], out: &mut DefaultsFile);

    /// Whether the value is absent (an optional key or section that is not set): the
    /// defaults file then shows the field's example, commented out.
    fn is_absent(&self) -> bool {
        false
    }
}

/// The value of one key as TOML writes it.
pub(super) trait TomlValue {
    /// `500`, `"raft"`, `["a", "b"]`.
    fn toml(&self) -> String;
}

/// Rust types whose values are of one kind.
macro_rules! leaf_kinds {
    ($($ty:ty => $kind:ident),* $(,)?) => {$(
        impl Schema for $ty {
            fn describe(key: Option<&str>, out: &mut Vec<(String, Kind)>) {
                if let Some(key) = key {
                    out.push((key.to_owned(), Kind::$kind));
                }
            }

            fn render(&self, key: Option<&str>, docs: &[&str], out: &mut DefaultsFile) {
                out.comment(docs);
                let (_, name) = split_key(key.unwrap_or_default());
                out.line(&format!("{name} = {}", self.toml()));
            }
        }
    )*};
}

leaf_kinds! {
    String => Text,
    PathBuf => Text,
    u64 => Number,
    bool => Switch,
    Vec<String> => TextList,
    Vec<super::HookEntry> => CommandList,
    super::HookEntry => Command,
}

impl TomlValue for String {
    fn toml(&self) -> String {
        toml_string(self)
    }
}

impl TomlValue for PathBuf {
    fn toml(&self) -> String {
        toml_string(&self.to_string_lossy())
    }
}

impl TomlValue for u64 {
    fn toml(&self) -> String {
        self.to_string()
    }
}

impl TomlValue for bool {
    fn toml(&self) -> String {
        self.to_string()
    }
}

impl<T: TomlValue> TomlValue for Vec<T> {
    fn toml(&self) -> String {
        let items: Vec<String> = self.iter().map(TomlValue::toml).collect();
        format!("[{}]", items.join(", "))
    }
}

impl TomlValue for super::HookEntry {
    fn toml(&self) -> String {
        match self {
            super::HookEntry::Shell(command) => command.toml(),
            super::HookEntry::Argv(words) => words.toml(),
        }
    }
}

/// `text` as a TOML basic string: quoted, with `"`, `\` and control characters escaped (for
/// writing configuration text, as the defaults file and the demo do).
pub fn toml_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// An optional key or section is described as what it holds, and written when set.
impl<T: Schema> Schema for Option<T> {
    const SECTION: bool = T::SECTION;

    fn describe(key: Option<&str>, out: &mut Vec<(String, Kind)>) {
        T::describe(key, out);
    }

    fn render(&self, key: Option<&str>, docs: &[&str], out: &mut DefaultsFile) {
        match self {
            Some(value) => value.render(key, docs, out),
            None => out.comment(docs),
        }
    }

    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

/// `config/default.toml` as it is being written from the declarations: every key with its
/// doc lines (the field's `///` comment) and its default.
#[derive(Debug, Default)]
pub(super) struct DefaultsFile {
    text: String,
    /// Writing an example: every line is commented out.
    commented: bool,
}

impl DefaultsFile {
    /// Doc lines as comments: `/// text` becomes `# text`.
    fn comment(&mut self, docs: &[&str]) {
        for line in docs {
            self.text.push('#');
            self.text.push_str(line.trim_end());
            self.text.push('\n');
        }
    }

    /// One line of TOML, commented out while an example is written.
    fn line(&mut self, line: &str) {
        if self.commented {
            self.text.push_str("# ");
        }
        self.text.push_str(line);
        self.text.push('\n');
    }

    /// An empty line between sections.
    fn blank(&mut self) {
        self.text.push('\n');
    }

    /// Writes `value`, the field `key` with `docs`, or when it is absent by default and has
    /// one, its `example` commented out.
    pub(super) fn field<T: Schema>(
        &mut self,
        value: &T,
        example: Option<T>,
        key: &str,
        docs: &[&str],
    ) {
        match example {
            Some(example) if value.is_absent() => {
                let was = std::mem::replace(&mut self.commented, true);
                example.render(Some(key), docs, self);
                self.commented = was;
            }
            _ => value.render(Some(key), docs, self),
        }
    }

    /// Writes the header of section `key` with its doc lines (the header is left out for a
    /// section that only holds sections, such as `[link]`).
    pub(super) fn section(&mut self, key: &str, docs: &[&str], has_values: bool) {
        self.blank();
        if has_values {
            self.line(&format!("[{key}]"));
        }
        self.comment(docs);
    }

    /// The file, with `header` (comment lines) first.
    pub(super) fn finish(self, header: &str) -> String {
        let mut text = String::from(header);
        text.push_str(&self.text);
        text
    }
}

/// The text of a doc attribute (`/// text` is `#[doc = " text"]`), or `None` for any other
/// attribute.
macro_rules! doc_text {
    (doc = $text:literal) => {
        Some($text)
    };
    ($($other:tt)*) => {
        None
    };
}
pub(super) use doc_text;

/// A field's default: the one declared with `= value`, else its type's.
macro_rules! default_of {
    ($default:expr) => {
        $default
    };
    () => {
        Default::default()
    };
}
pub(super) use default_of;

/// A field's example, when declared with `, example value`.
macro_rules! example_of {
    ($example:expr) => {
        Some($example)
    };
    () => {
        None
    };
}
pub(super) use example_of;

/// A key's name: the field's, or the one given with `as "name"`.
macro_rules! key_name {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident, $key:literal) => {
        $key
    };
}
pub(super) use key_name;

/// Declares section structs, each field one key, declared once: its name, its type, its
/// default (`= value`; absent: the type's default) and its doc lines (the `///` comment, which
/// is both the field's documentation and its comment in `config/default.toml`). From that,
/// the macro derives the key table ([`Schema::describe`]), `Default`, and the defaults file
/// ([`Schema::render`]), so none of them can disagree with the structs.
///
/// A field written `name as "key": Type` is the key `key` (serde's `rename`). A field that
/// is absent by default (an optional key or section) may give `, example value` after its
/// default: the defaults file shows that example, commented out. Fields after `@unread` are
/// not keys (serde skips them).
macro_rules! sections {
    ($(
        $(#[$section_meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$($field_attr:tt)*])*
                pub $field:ident $(as $key:literal)? : $ty:ty
                    $(= $default:expr)? $(, example $example:expr)?,
            )*
            $(
                @unread
                $(
                    $(#[$unread_meta:meta])*
                    $unread:ident : $unread_ty:ty,
                )*
            )?
        }
    )*) => {$(
        $(#[$section_meta])*
        pub struct $name {
            $(
                $(#[$($field_attr)*])*
                $(#[serde(rename = $key)])?
                pub $field: $ty,
            )*
            $($(
                $(#[$unread_meta])*
                #[serde(skip)]
                $unread: $unread_ty,
            )*)?
        }

        impl Default for $name {
            fn default() -> Self {
                Self {
                    $($field: schema::default_of!($($default)?),)*
                    $($($unread: Default::default(),)*)?
                }
            }
        }

        impl schema::Schema for $name {
            const SECTION: bool = true;

            fn describe(key: Option<&str>, out: &mut Vec<(String, schema::Kind)>) {
                if let Some(key) = key {
                    out.push((key.to_owned(), schema::Kind::Section));
                }
                $(
                    let name = schema::key_name!($field $(, $key)?);
                    let inner = match key {
                        Some(key) => format!("{key}.{name}"),
                        None => name.to_owned(),
                    };
                    <$ty as schema::Schema>::describe(Some(&inner), out);
                )*
            }

            fn render(&self, key: Option<&str>, docs: &[&str], out: &mut schema::DefaultsFile) {
                if let Some(key) = key {
                    let sections: &[bool] = &[$(<$ty as schema::Schema>::SECTION),*];
                    out.section(key, docs, sections.iter().any(|section| !section));
                }
                $(
                    let name = schema::key_name!($field $(, $key)?);
                    let inner = match key {
                        Some(key) => format!("{key}.{name}"),
                        None => name.to_owned(),
                    };
                    let attrs: &[Option<&str>] = &[$(schema::doc_text!($($field_attr)*)),*];
                    let docs: Vec<&str> = attrs.iter().flatten().copied().collect();
                    let example: Option<$ty> = schema::example_of!($($example)?);
                    out.field(&self.$field, example, &inner, &docs);
                )*
            }
        }
    )*};
}
pub(super) use sections;

/// The type of `key`, or `None` for an unknown key.
pub(super) fn kind_of(key: &str) -> Option<Kind> {
    KEYS.iter()
        .find(|(known, _)| known == key)
        .map(|&(_, kind)| kind)
}

/// `parent.name`, or `name` at the top level.
fn join(parent: Option<&str>, name: &str) -> String {
    match parent {
        Some(parent) => format!("{parent}.{name}"),
        None => name.to_owned(),
    }
}

/// The section holding `key` and the key's own name.
fn split_key(key: &str) -> (Option<&str>, &str) {
    match key.rsplit_once('.') {
        Some((parent, name)) => (Some(parent), name),
        None => (None, key),
    }
}

/// The names of the keys directly inside `section` (`None`: the top level).
fn children(section: Option<&str>) -> impl Iterator<Item = &'static str> + '_ {
    KEYS.iter().filter_map(move |(key, _)| {
        let (parent, name) = split_key(key);
        (parent == section).then_some(name)
    })
}

/// Checks one parsed TOML layer: returns what passed, and records every unknown key and
/// mistyped value in `problems`.
pub(super) fn check_table(
    table: &Map<String, Value>,
    section: Option<&str>,
    problems: &mut Vec<ConfigProblem>,
) -> Map<String, Value> {
    let mut names: Vec<&String> = table.keys().collect();
    names.sort();
    let mut kept = Map::new();
    for name in names {
        let Some(value) = table.get(name) else {
            continue;
        };
        let key = join(section, name);
        match kind_of(&key) {
            None => problems.push(ConfigProblem::new(&key, unknown_key(&key))),
            Some(Kind::Section) => match &value.kind {
                ValueKind::Table(inner) => {
                    let inner = check_table(inner, Some(&key), problems);
                    kept.insert(name.clone(), Value::new(None, ValueKind::Table(inner)));
                }
                other => problems.push(ConfigProblem::new(
                    &key,
                    format!("expected a section ([{key}]), found {}", describe(other)),
                )),
            },
            // One hook command written alone, not in an array: a list of that one command
            // (the README's "a command is a string or an argv array" holds for the key too).
            Some(Kind::CommandList) if matches!(value.kind, ValueKind::String(_)) => {
                kept.insert(
                    name.clone(),
                    Value::new(None, ValueKind::Array(vec![value.clone()])),
                );
            }
            Some(kind) => {
                let found = check_value(&key, kind, value);
                if found.is_empty() {
                    kept.insert(name.clone(), value.clone());
                } else {
                    problems.extend(found);
                }
            }
        }
    }
    kept
}

/// Reads the `CONCLAVE__…` variables of `env` into (key, value) overrides, recording unknown
/// keys and unreadable values in `problems`.
pub(super) fn check_env(
    env: &BTreeMap<String, String>,
    problems: &mut Vec<ConfigProblem>,
) -> Vec<(String, Value)> {
    let mut overrides = Vec::new();
    for (name, raw) in env {
        let Some(path) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        let key = path
            .split(ENV_SEPARATOR)
            .map(str::to_ascii_lowercase)
            .collect::<Vec<_>>()
            .join(".");
        let set_by = format!("set by {name}");
        match kind_of(&key) {
            None => {
                let key = if key.is_empty() { name.as_str() } else { &key };
                problems.push(ConfigProblem::new(
                    key,
                    format!("{} ({set_by})", unknown_key(key)),
                ));
            }
            Some(Kind::Section) => {
                let inside = format!("{key}.");
                let example = KEYS
                    .iter()
                    .find(|(known, kind)| *kind != Kind::Section && known.starts_with(&inside))
                    .map_or_else(String::new, |(known, _)| {
                        format!(", e.g. {}", env_name(known))
                    });
                problems.push(ConfigProblem::new(
                    &key,
                    format!(
                        "is a section, not a value ({set_by}); set its keys one by one{example}"
                    ),
                ));
            }
            Some(kind) => match env_value(kind, raw) {
                Ok(value) => {
                    let found = check_value(&key, kind, &value);
                    if found.is_empty() {
                        overrides.push((key, value));
                    }
                    problems.extend(found.into_iter().map(|mut problem| {
                        problem.message = format!("{} ({set_by})", problem.message);
                        problem
                    }));
                }
                Err(message) => {
                    problems.push(ConfigProblem::new(&key, format!("{message} ({set_by})")));
                }
            },
        }
    }
    overrides
}

/// The environment variable that sets `key`: `CONCLAVE__LINK__UDP__LISTEN`.
fn env_name(key: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        key.replace('.', ENV_SEPARATOR).to_ascii_uppercase()
    )
}

/// An environment variable's text as a value of `kind`.
fn env_value(kind: Kind, raw: &str) -> Result<Value, String> {
    let kind = match kind {
        Kind::Section | Kind::Text => ValueKind::String(raw.to_owned()),
        Kind::Number => raw
            .trim()
            .parse::<u64>()
            .map(ValueKind::U64)
            .map_err(|_| format!("expected a whole number, found {raw:?}"))?,
        Kind::Switch => match raw.trim().to_ascii_lowercase().as_str() {
            "true" => ValueKind::Boolean(true),
            "false" => ValueKind::Boolean(false),
            _ => return Err(format!("expected true or false, found {raw:?}")),
        },
        Kind::TextList | Kind::CommandList | Kind::Command if raw.trim_start().starts_with('[') => {
            let mut table = parse_toml(&format!("value = {raw}"))
                .map_err(|error| format!("{raw:?} is not a valid TOML array: {error}"))?;
            return table
                .remove("value")
                .ok_or_else(|| format!("{raw:?} is not a valid TOML array"));
        }
        Kind::Command => ValueKind::String(raw.to_owned()),
        Kind::TextList | Kind::CommandList => ValueKind::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| Value::new(None, ValueKind::String(item.to_owned())))
                .collect(),
        ),
    };
    Ok(Value::new(None, kind))
}

/// The problems of `value` as the value of `key`, which has type `kind`; empty when it fits.
fn check_value(key: &str, kind: Kind, value: &Value) -> Vec<ConfigProblem> {
    let wrong = |expected: &str, hint: &str| {
        vec![ConfigProblem::new(
            key,
            format!("expected {expected}, found {}{hint}", describe(&value.kind)),
        )]
    };
    match (kind, &value.kind) {
        (Kind::Section, ValueKind::Table(_))
        | (Kind::Text, ValueKind::String(_))
        | (Kind::Switch, ValueKind::Boolean(_))
        | (Kind::Number, ValueKind::U64(_)) => Vec::new(),
        (Kind::Number, &ValueKind::I64(n)) if n >= 0 => Vec::new(),
        (Kind::Number, &ValueKind::I64(n)) => {
            vec![ConfigProblem::new(
                key,
                format!("must not be negative, found {n}"),
            )]
        }
        (Kind::Number, ValueKind::String(text)) if text.trim().parse::<u64>().is_ok() => {
            wrong("a whole number", "; write it without quotes")
        }
        (Kind::Number, _) => wrong("a whole number", ""),
        (Kind::Switch, ValueKind::String(text)) if matches!(text.as_str(), "true" | "false") => {
            wrong("true or false", "; write it without quotes")
        }
        (Kind::Switch, _) => wrong("true or false", ""),
        (Kind::Text, _) => wrong("a string", "; put it in quotes"),
        (Kind::Section, _) => wrong(&format!("a section ([{key}])"), ""),
        (Kind::TextList, ValueKind::Array(items)) => items
            .iter()
            .enumerate()
            .filter(|(_, item)| !matches!(item.kind, ValueKind::String(_)))
            .map(|(i, item)| {
                ConfigProblem::new(
                    format!("{key}[{i}]"),
                    format!("expected a string, found {}", describe(&item.kind)),
                )
            })
            .collect(),
        (Kind::CommandList, ValueKind::Array(items)) => items
            .iter()
            .enumerate()
            .flat_map(|(i, item)| check_command(key, Some(i), item))
            .collect(),
        (Kind::TextList, ValueKind::String(text)) => {
            wrong("an array of strings", &format!("; write [{text:?}]"))
        }
        (Kind::TextList, _) => wrong("an array of strings", ""),
        (Kind::CommandList, ValueKind::String(text)) => {
            wrong("an array of commands", &format!("; write [{text:?}]"))
        }
        (Kind::CommandList, _) => wrong("an array of commands", ""),
        (Kind::Command, ValueKind::String(_)) => Vec::new(),
        (Kind::Command, ValueKind::Array(_)) => check_command(key, None, value),
        (Kind::Command, _) => wrong("a command string or an array of strings", ""),
    }
}

/// The problems of item `i` of the hook list `key` (or of the command `key` itself, without
/// `i`): a string, or an array of strings.
fn check_command(key: &str, i: Option<usize>, item: &Value) -> Vec<ConfigProblem> {
    let key = match i {
        Some(i) => format!("{key}[{i}]"),
        None => key.to_owned(),
    };
    match &item.kind {
        ValueKind::String(_) => Vec::new(),
        ValueKind::Array(words) => words
            .iter()
            .enumerate()
            .filter(|(_, word)| !matches!(word.kind, ValueKind::String(_)))
            .map(|(j, word)| {
                ConfigProblem::new(
                    format!("{key}[{j}]"),
                    format!("expected a string, found {}", describe(&word.kind)),
                )
            })
            .collect(),
        other => vec![ConfigProblem::new(
            key,
            format!(
                "expected a command string or an array of strings, found {}",
                describe(other)
            ),
        )],
    }
}

/// A value as a message shows it.
fn describe(kind: &ValueKind) -> String {
    match kind {
        ValueKind::Nil => "nothing".to_owned(),
        ValueKind::Boolean(b) => format!("boolean {b}"),
        ValueKind::I64(n) => format!("integer {n}"),
        ValueKind::I128(n) => format!("integer {n}"),
        ValueKind::U64(n) => format!("integer {n}"),
        ValueKind::U128(n) => format!("integer {n}"),
        ValueKind::Float(x) => format!("number {x}"),
        ValueKind::String(text) => format!("string {text:?}"),
        ValueKind::Table(_) => "a table".to_owned(),
        ValueKind::Array(_) => "an array".to_owned(),
    }
}

/// The message for an unknown `key`: the likely intended key, or what the section accepts.
fn unknown_key(key: &str) -> String {
    let candidates = suggestions(key);
    if !candidates.is_empty() {
        return format!("unknown key; did you mean {}?", candidates.join(" or "));
    }
    let (section, _) = split_key(key);
    let accepted = children(section).collect::<Vec<_>>().join(", ");
    match section {
        Some(section) => format!("unknown key; [{section}] accepts {accepted}"),
        None => format!("unknown key; the sections are {accepted}"),
    }
}

/// Known keys that `key` was probably meant to be: a sibling spelled nearly the same (or
/// without its `_ms` unit), else keys of the same name in other sections.
fn suggestions(key: &str) -> Vec<String> {
    let (section, name) = split_key(key);
    let tolerance = if name.len() <= 4 {
        1
    } else {
        (name.len() / 4).max(2)
    };
    let nearest = children(section)
        .map(|sibling| {
            let distance = if sibling.strip_suffix("_ms") == Some(name) {
                0
            } else {
                edit_distance(name, sibling)
            };
            (distance, sibling)
        })
        .filter(|&(distance, _)| distance <= tolerance)
        .min();
    if let Some((_, sibling)) = nearest {
        return vec![join(section, sibling)];
    }
    KEYS.iter()
        .filter(|(known, _)| split_key(known).1 == name)
        .map(|(known, _)| known.clone())
        .collect()
}

/// Levenshtein distance between two ASCII-ish strings, by bytes.
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.as_bytes().iter().enumerate() {
        let mut current = Vec::with_capacity(b.len() + 1);
        current.push(i + 1);
        for (j, &cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            let delete = previous[j + 1] + 1;
            let insert = current[j] + 1;
            current.push(substitute.min(delete).min(insert));
        }
        previous = current;
    }
    previous[b.len()]
}

/// The dotted keys of the values (not sections) in a checked `table` under `section`, with
/// their values.
pub(super) fn leaf_values(
    table: &Map<String, Value>,
    section: Option<&str>,
    out: &mut Vec<(String, Value)>,
) {
    for (name, value) in table {
        let key = join(section, name);
        match &value.kind {
            ValueKind::Table(inner) if kind_of(&key) == Some(Kind::Section) => {
                leaf_values(inner, Some(&key), out);
            }
            _ => out.push((key, value.clone())),
        }
    }
}

/// The value of the dotted `key` in `table`, if set.
pub(super) fn lookup<'t>(table: &'t Map<String, Value>, key: &str) -> Option<&'t Value> {
    let (first, rest) = match key.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (key, None),
    };
    let value = table.get(first)?;
    match (rest, &value.kind) {
        (None, _) => Some(value),
        (Some(rest), ValueKind::Table(inner)) => lookup(inner, rest),
        (Some(_), _) => None,
    }
}

/// Whether two values are the same setting: a number read from TOML (signed) and one read
/// from the environment (unsigned) compare by value.
pub(super) fn same_value(a: &ValueKind, b: &ValueKind) -> bool {
    match (a, b) {
        (&ValueKind::I64(x), &ValueKind::U64(y)) | (&ValueKind::U64(y), &ValueKind::I64(x)) => {
            u64::try_from(x) == Ok(y)
        }
        (ValueKind::Array(x), ValueKind::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(&x.kind, &y.kind))
        }
        _ => a == b,
    }
}
