//! Escaping of everything that reaches the HTML page: command lines, marker labels, paths, environment
//! values come from the user or the traced program and must show as text, never run.

/// Escapes text for an HTML element body or a quoted attribute value.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Serialises a value as JSON that is safe inside `<script type="application/json">`: `<`, `>` and `&`
/// only ever occur inside JSON strings, where `\u003c` etc. mean the same, so `</script>` or `<!--` in
/// the data can no longer end the block. U+2028/U+2029 are escaped too (harmless in JSON, not in JS).
pub fn json_for_script<T: serde::Serialize>(value: &T) -> serde_json::Result<String> {
    let raw = serde_json::to_string(value)?;
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_neutralised() {
        assert_eq!(
            html(r#"<script>alert("x") & 'y'</script>"#),
            "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn json_cannot_close_the_script_block_and_round_trips() {
        let hostile = vec!["</script><script>alert(1)</script>", "<!--", "a&b"];
        let json = json_for_script(&hostile).unwrap();
        assert!(!json.contains('<') && !json.contains('>'));
        let back: Vec<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, hostile);
    }
}
