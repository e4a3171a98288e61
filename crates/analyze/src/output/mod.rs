//! Writers of an `Analysis`: one file per format.
pub mod csv;
pub mod json;
pub mod residency;
pub mod sites;
pub mod text;

/// A command line for one line of text: the arguments joined by spaces, "?" when there are none,
/// control characters escaped (`\n`, `\t`, `\u{1b}`): a `python3 -c` script of several lines
/// would otherwise break the tables and headings it is printed in.
pub fn command_line(args: &[String]) -> String {
    if args.is_empty() {
        return "?".to_string();
    }
    let mut out = String::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        for c in arg.chars() {
            if c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_line_escapes_control_characters_only() {
        let args = ["python3", "-c", "import os\n\tprint(1) # \u{e9}"].map(String::from);
        assert_eq!(
            super::command_line(&args),
            "python3 -c import os\\n\\tprint(1) # \u{e9}"
        );
        assert_eq!(super::command_line(&[]), "?");
    }
}
