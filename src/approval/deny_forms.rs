//! The forms of a simple command a deny rule is tried on.
//!
//! A deny rule is a guard rail, not a sandbox, but it should not fall to
//! the first trick a model (or a prompt injection) reaches for: quotes
//! (`"rm"`), a directory (`/bin/rm`), ANSI-C quoting (`$'\x72m'`), `$IFS`
//! for a blank (`rm${IFS}-f`), assignments (`X=1 rm`), the common wrappers
//! that run their arguments as a command (`time`, `exec`, `command`, `env`,
//! `nice`, `nohup`, `sudo`, `xargs`, …), or a glob for the program
//! (`/bin/r?`). Each simple command is turned into the words bash would
//! run, and the rule is tried on every way of reading them.

use super::bash;

/// Wrappers that run the rest of their words as a command, each with the
/// options it takes that consume the next word as their value.
const WRAPPERS: &[(&str, &[&str])] = &[
    ("builtin", &[]),
    ("command", &[]),
    ("doas", &["-u", "-C"]),
    (
        "env",
        &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"],
    ),
    ("exec", &["-a"]),
    ("ionice", &["-c", "-n", "-p", "-P", "-u"]),
    ("nice", &["-n", "--adjustment"]),
    ("nohup", &[]),
    ("setsid", &[]),
    ("stdbuf", &["-i", "-o", "-e"]),
    (
        "sudo",
        &[
            "-u", "-g", "-h", "-p", "-C", "-D", "-R", "-T", "-U", "-r", "-t",
        ],
    ),
    ("time", &["-f", "-o", "--format", "--output"]),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"]),
    ("xargs", &["-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"]),
];

/// Every reading of `text` a deny rule with `pattern` is tried on: as
/// written, and as the words bash would run with assignments and wrappers
/// taken off, each also with the program's directory dropped and with a
/// globbed program name that could name the rule's program read as it.
pub fn deny_forms(text: &str, pattern: &str) -> Vec<String> {
    let mut forms = vec![text.to_owned(), bash::dequote(text)];
    let mut words = shell_words(text);
    loop {
        strip_assignments(&mut words);
        if words.is_empty() {
            break;
        }
        push_readings(&mut forms, &words, pattern);
        if !strip_wrapper(&mut words) {
            break;
        }
    }
    forms
}

/// The readings of one command's words: joined as they are, with the
/// program's directory dropped, and with a glob in the program's name
/// taken as the rule's program when it matches it.
fn push_readings(forms: &mut Vec<String>, words: &[String], pattern: &str) {
    let rest = words[1..].iter().fold(String::new(), |mut out, w| {
        out.push(' ');
        out.push_str(w);
        out
    });
    let program = &words[0];
    forms.push(format!("{program}{rest}"));
    let base = program.rsplit('/').next().unwrap_or(program);
    if base != program {
        forms.push(format!("{base}{rest}"));
    }
    let wanted = bash::first_word(pattern);
    let literal = !wanted.contains(['*', '?', '[', '\\']);
    if literal && base.contains(['*', '?', '[']) && glob_matches(base, wanted) {
        forms.push(format!("{wanted}{rest}"));
    }
}

/// Drops leading `NAME=value` words: bash runs the word after them.
fn strip_assignments(words: &mut Vec<String>) {
    let n = words.iter().take_while(|w| bash::is_assignment(w)).count();
    words.drain(..n);
}

/// Takes a wrapper (with its options, and the duration `timeout` needs)
/// off the front of `words`; false when the program is not one.
fn strip_wrapper(words: &mut Vec<String>) -> bool {
    let base = words[0].rsplit('/').next().unwrap_or(&words[0]).to_owned();
    let Some((name, valued)) = WRAPPERS.iter().find(|(name, _)| *name == base) else {
        return false;
    };
    let mut i = 1;
    while let Some(word) = words.get(i) {
        if word == "--" {
            i += 1;
            break;
        }
        if *name == "env" && bash::is_assignment(word) {
            i += 1;
            continue;
        }
        if !word.starts_with('-') || word == "-" {
            break;
        }
        // `nice -5`, `-n5`, `--adjustment=5` carry their value; `-n 5` not.
        i += if valued.contains(&word.as_str()) {
            2
        } else {
            1
        };
    }
    if *name == "timeout" && i < words.len() {
        i += 1; // the duration
    }
    words.drain(..i.min(words.len()));
    true
}

/// Whether the shell glob `glob` (`*`, `?`, `[…]`) matches `name`.
fn glob_matches(glob: &str, name: &str) -> bool {
    globset::Glob::new(glob).is_ok_and(|g| g.compile_matcher().is_match(name))
}

/// The words bash would make of a simple command: quotes removed, ANSI-C
/// strings (`$'…'`) decoded, and an unquoted `$IFS` / `${IFS}` a blank.
/// Anything else it does not expand is kept as written.
pub fn shell_words(text: &str) -> Vec<String> {
    let text = text.replace("${IFS}", " ").replace("$IFS", " ");
    let mut words = Vec::new();
    let mut word = String::new();
    let mut started = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            '\\' => {
                started = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            '\'' => {
                started = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                started = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                            word.extend(chars.next());
                        }
                        _ => word.push(c),
                    }
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                started = true;
                ansi_c(&mut chars, &mut word);
            }
            _ => {
                started = true;
                word.push(c);
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// Decodes the body of a `$'…'` string up to its closing quote.
fn ansi_c(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, word: &mut String) {
    while let Some(c) = chars.next() {
        match c {
            '\'' => return,
            '\\' => {
                let Some(e) = chars.next() else { return };
                match e {
                    'n' => word.push('\n'),
                    't' => word.push('\t'),
                    'r' => word.push('\r'),
                    'a' => word.push('\x07'),
                    'b' => word.push('\x08'),
                    'e' | 'E' => word.push('\x1b'),
                    'f' => word.push('\x0c'),
                    'v' => word.push('\x0b'),
                    'x' => push_code(word, chars, 16, 2),
                    'u' => push_code(word, chars, 16, 4),
                    'U' => push_code(word, chars, 16, 8),
                    '0'..='7' => {
                        let mut value = e.to_digit(8).unwrap_or(0);
                        for _ in 0..2 {
                            match chars.peek().and_then(|c| c.to_digit(8)) {
                                Some(d) => {
                                    value = value * 8 + d;
                                    chars.next();
                                }
                                None => break,
                            }
                        }
                        word.extend(char::from_u32(value));
                    }
                    other => word.push(other),
                }
            }
            _ => word.push(c),
        }
    }
}

/// Reads up to `max` digits of `radix` and pushes the character they code.
fn push_code(
    word: &mut String,
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    radix: u32,
    max: usize,
) {
    let mut value = 0u32;
    let mut read = 0;
    while read < max {
        match chars.peek().and_then(|c| c.to_digit(radix)) {
            Some(d) => {
                value = value.saturating_mul(radix).saturating_add(d);
                chars.next();
                read += 1;
            }
            None => break,
        }
    }
    if read > 0 {
        word.extend(char::from_u32(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(pattern: &str, command: &str) -> bool {
        deny_forms(command, pattern)
            .iter()
            .any(|form| bash::wildcard_match(pattern, form))
    }

    #[test]
    fn wrappers_assignments_and_tricks_do_not_pass_a_deny_rule() {
        for command in [
            "rm -rf x",
            "X=1 rm -rf x",
            "time rm -rf x",
            "exec rm -rf x",
            "command rm -rf x",
            "env rm -rf x",
            "env -i A=b rm -rf x",
            "nice rm -rf x",
            "nice -n 5 rm -rf x",
            "nohup rm -rf x",
            "sudo -u root rm -rf x",
            "timeout 5 rm -rf x",
            "timeout -s KILL 5 rm -rf x",
            "xargs rm -rf",
            "time nice env X=1 /bin/rm -rf x",
            "rm${IFS}-rf${IFS}x",
            "rm$IFS-rf x",
            "$'\\x72m' -rf x",
            "$'\\162m' -rf x",
            "$'r\\u006d' -rf x",
            "/bin/r? -rf x",
            "/bin/r* -rf x",
            "/bin/[r]m -rf x",
            "\"rm\" -rf x",
            "r\\m -rf x",
        ] {
            assert!(denied("rm *", command), "{command} passed bash:rm *");
        }
    }

    #[test]
    fn other_commands_are_not_denied() {
        for command in [
            "ls -l",
            "echo rm -rf x",
            "git rm x",
            "/bin/l? -l",
            "X=rm ls",
            "env",
            "time",
        ] {
            assert!(
                !denied("rm *", command),
                "{command} was denied by bash:rm *"
            );
        }
    }

    #[test]
    fn words_follow_bash_quoting() {
        assert_eq!(
            shell_words(r#"a "b c" 'd e' f\ g"#),
            ["a", "b c", "d e", "f g"]
        );
        assert_eq!(shell_words(r"$'a\tb' $'\x41'"), ["a\tb", "A"]);
        assert_eq!(shell_words("a${IFS}b"), ["a", "b"]);
    }
}
