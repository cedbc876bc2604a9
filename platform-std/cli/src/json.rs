//! Just enough JSON output: objects and arrays built as strings.

use core::fmt::Write as _;

/// A JSON string literal for `s`.
pub(crate) fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A number: finite floats as they are, others as null.
pub(crate) fn number(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        "null".into()
    }
}

/// A JSON object under construction.
#[derive(Debug, Default)]
pub(crate) struct Object {
    out: String,
}

impl Object {
    pub(crate) fn new() -> Object {
        Object::default()
    }

    pub(crate) fn raw(&mut self, key: &str, value: &str) {
        self.out
            .push_str(if self.out.is_empty() { "{" } else { ", " });
        self.out.push_str(&string(key));
        self.out.push_str(": ");
        self.out.push_str(value);
    }

    pub(crate) fn string(&mut self, key: &str, value: &str) {
        self.raw(key, &string(value));
    }

    pub(crate) fn int(&mut self, key: &str, value: impl Into<i128>) {
        self.raw(key, &value.into().to_string());
    }

    pub(crate) fn float(&mut self, key: &str, value: f64) {
        self.raw(key, &number(value));
    }

    pub(crate) fn bool(&mut self, key: &str, value: bool) {
        self.raw(key, if value { "true" } else { "false" });
    }

    pub(crate) fn null(&mut self, key: &str) {
        self.raw(key, "null");
    }

    pub(crate) fn finish(mut self) -> String {
        if self.out.is_empty() {
            self.out.push('{');
        }
        self.out.push('}');
        self.out
    }
}

/// A JSON array under construction.
#[derive(Debug, Default)]
pub(crate) struct Array {
    out: String,
}

impl Array {
    pub(crate) fn new() -> Array {
        Array::default()
    }

    pub(crate) fn push_raw(&mut self, value: &str) {
        self.out
            .push_str(if self.out.is_empty() { "[" } else { ", " });
        self.out.push_str(value);
    }

    pub(crate) fn finish(mut self) -> String {
        if self.out.is_empty() {
            self.out.push('[');
        }
        self.out.push(']');
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_shapes() {
        assert_eq!(string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        let mut o = Object::new();
        o.string("k", "v");
        o.int("n", 3i64);
        o.bool("b", false);
        o.null("z");
        let mut a = Array::new();
        a.push_raw("1");
        a.push_raw("2");
        o.raw("a", &a.finish());
        o.float("f", 2.5);
        assert_eq!(
            o.finish(),
            r#"{"k": "v", "n": 3, "b": false, "z": null, "a": [1, 2], "f": 2.5}"#
        );
        assert_eq!(Object::new().finish(), "{}");
        assert_eq!(Array::new().finish(), "[]");
    }
}
