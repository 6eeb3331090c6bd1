//! What a `bash` command line runs, as far as approval rules need to know.
//!
//! A rule such as `bash:git status*` is meant to allow `git status`, not
//! everything a shell can chain after it. So a line is split into its simple
//! commands — on `;`, `&`, `&&`, `||`, `|`, newlines and subshell parentheses,
//! outside quotes — and each is matched on its own. Command and process
//! substitution (`$(…)`, backticks, `<(…)`, `>(…)`) run commands hidden
//! inside a word; a line containing one is flagged so no allow rule can
//! cover it, and the commands inside are split out too, so a deny rule still
//! sees them.
//!
//! This is not a shell parser: where it is unsure (an unterminated quote, a
//! here-document without its end, an arithmetic `((…))`) it says the line
//! is uncertain, and an uncertain line matches no allow rule either. Erring
//! there only means the user is asked.

/// One simple command of a line: what a rule's pattern is matched against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// Its text with runs of blanks outside quotes collapsed to one space,
    /// leading reserved words (`if`, `then`, `do`, `!`, `{`, …) removed, and
    /// redirections kept (`cargo test 2>&1`).
    pub text: String,
    /// Whether it redirects output into a file (`> out`, `>> log`, `&> f`),
    /// rather than to `/dev/null` or another descriptor: a wildcard that
    /// allowed `cat *` must not also allow `cat x > ~/.bashrc`.
    pub writes_file: bool,
}

/// A command line taken apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandLine {
    /// The simple commands, those inside substitutions included.
    pub commands: Vec<SimpleCommand>,
    /// The line contains `$(`, a backtick, `<(` or `>(` outside single
    /// quotes (or in the body of an unquoted here-document).
    pub substitution: bool,
    /// The split may not be what bash runs: a quote, substitution or
    /// here-document is left open at the end, or the line uses `((…))`.
    pub uncertain: bool,
}

/// Words that open or continue a compound command: they run nothing
/// themselves, so `if git status` is matched as `git status`.
const LEADING_KEYWORDS: [&str; 9] = [
    "!", "{", "if", "then", "elif", "else", "while", "until", "do",
];
/// Words that close a compound command; alone they run nothing.
const CLOSING_KEYWORDS: [&str; 4] = ["}", "fi", "done", "esac"];

/// Characters that end an unquoted word.
fn is_meta(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LevelKind {
    Top,
    /// `$(…)`, `<(…)`, `>(…)` or a `( … )` subshell.
    Paren,
    /// `` `…` ``.
    Backtick,
}

/// One nesting level of commands: the line itself, or the inside of a
/// substitution or subshell.
struct Level {
    kind: LevelKind,
    /// The simple command being read at this level.
    buf: String,
    writes_file: bool,
    /// Inside a double-quoted string at this level.
    dquote: bool,
    /// A substitution is part of the word around it, so its text also
    /// belongs to the enclosing command (`echo $(date)`); a subshell's
    /// commands do not.
    echo_to_parent: bool,
}

impl Level {
    fn new(kind: LevelKind, echo_to_parent: bool) -> Self {
        Self {
            kind,
            buf: String::new(),
            writes_file: false,
            dquote: false,
            echo_to_parent,
        }
    }
}

struct HereDoc {
    delimiter: String,
    strip_tabs: bool,
    /// An unquoted delimiter means the body is expanded: `$(…)` in it runs.
    expands: bool,
}

/// What the last unquoted character read was, for the characters whose
/// meaning depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// A blank or an operator: a word starts here, so `#` is a comment.
    Break,
    /// An unescaped `>` or `<`: `&` and `|` continue the redirection
    /// (`2>&1`, `>|`) instead of separating commands.
    Redirect,
    Word,
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    after: After,
    stack: Vec<Level>,
    here_docs: Vec<HereDoc>,
    out: CommandLine,
}

/// Splits a command line into its simple commands.
pub fn parse(line: &str) -> CommandLine {
    let mut p = Parser {
        chars: line.chars().collect(),
        at: 0,
        after: After::Break,
        stack: vec![Level::new(LevelKind::Top, false)],
        here_docs: Vec::new(),
        out: CommandLine::default(),
    };
    p.run();
    p.out
}

impl Parser {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    #[expect(
        clippy::expect_used,
        reason = "the parser starts with the top level and pops only the levels it pushed"
    )]
    fn level(&mut self) -> &mut Level {
        self.stack
            .last_mut()
            .expect("the top level is never popped")
    }

    /// Appends text to the current command and to each enclosing command
    /// the current level's text belongs to.
    fn push_str(&mut self, s: &str) {
        Self::push_from(&mut self.stack, s, 0);
    }

    /// Like [`Self::push_str`], starting `skip` levels below the current.
    fn push_from(stack: &mut [Level], s: &str, skip: usize) {
        for level in stack.iter_mut().rev().skip(skip) {
            level.buf.push_str(s);
            if !level.echo_to_parent {
                break;
            }
        }
    }

    fn push(&mut self, c: char) {
        let mut b = [0; 4];
        self.push_str(c.encode_utf8(&mut b));
    }

    /// Ends the current level's simple command; `separator` still belongs
    /// to the text of the commands enclosing it.
    fn end_command(&mut self, separator: &str) {
        let level = self.level();
        let text = std::mem::take(&mut level.buf);
        let writes_file = std::mem::take(&mut level.writes_file);
        let echoes = level.echo_to_parent;
        self.emit(&text, writes_file);
        if echoes {
            Self::push_from(&mut self.stack, separator, 1);
        }
    }

    fn emit(&mut self, text: &str, writes_file: bool) {
        let mut text = collapse(text);
        while let Some((first, rest)) = text.split_once(' ') {
            if !LEADING_KEYWORDS.contains(&first) {
                break;
            }
            text = rest.to_owned();
        }
        let keyword_only =
            CLOSING_KEYWORDS.contains(&text.as_str()) || LEADING_KEYWORDS.contains(&text.as_str());
        if !text.is_empty() && !keyword_only {
            self.out.commands.push(SimpleCommand { text, writes_file });
        }
    }

    fn open(&mut self, kind: LevelKind, substitution: bool) {
        self.out.substitution |= substitution;
        self.stack.push(Level::new(kind, substitution));
        self.after = After::Break;
    }

    fn close(&mut self, closer: &str) {
        self.end_command("");
        self.after = After::Word;
        if let Some(level) = self.stack.pop() {
            if level.echo_to_parent {
                self.push_str(closer);
            }
        }
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            if self.level().dquote {
                self.in_double_quotes(c);
            } else {
                self.unquoted(c);
            }
        }
        if self.stack.len() > 1 || self.level().dquote || !self.here_docs.is_empty() {
            self.out.uncertain = true;
        }
        while self.stack.len() > 1 {
            self.close("");
        }
        self.end_command("");
    }

    fn in_double_quotes(&mut self, c: char) {
        self.after = After::Word;
        match c {
            '"' => {
                self.push(c);
                self.level().dquote = false;
                self.at += 1;
            }
            '\\' => self.backslash(),
            '$' if self.peek(1) == Some('(') => {
                self.push_str("$(");
                self.at += 2;
                self.open(LevelKind::Paren, true);
            }
            '`' => self.backtick(),
            '$' if self.runs_a_command_at_brace() => self.funsub(),
            _ => {
                self.push(c);
                self.at += 1;
            }
        }
    }

    /// Whether a `$` here opens `${` that is not a plain parameter
    /// expansion: bash 5.3 runs `${ cmd; }` and `${| cmd; }` as command
    /// substitutions, and a later bash may add more forms, so any `${` not
    /// followed by what a parameter starts with is treated as one.
    fn runs_a_command_at_brace(&self) -> bool {
        self.peek(1) == Some('{')
            && !self.peek(2).is_some_and(|c| {
                c.is_ascii_alphanumeric()
                    || matches!(c, '_' | '#' | '!' | '@' | '*' | '?' | '$' | '-')
            })
    }

    /// `${ …` run as a command substitution: no allow rule covers the line.
    fn funsub(&mut self) {
        self.out.substitution = true;
        self.push('$');
        self.at += 1;
    }

    fn unquoted(&mut self, c: char) {
        let after = std::mem::replace(&mut self.after, After::Word);
        match c {
            ' ' | '\t' => {
                self.push(c);
                self.at += 1;
                self.after = After::Break;
            }
            '\'' => self.single_quoted(1),
            '"' => {
                self.push(c);
                self.level().dquote = true;
                self.at += 1;
            }
            '\\' => {
                if self.peek(1) == Some('\n') {
                    // A line continuation: bash joins the lines, so what
                    // comes next continues what came before.
                    self.after = after;
                }
                self.backslash();
            }
            '$' if self.peek(1) == Some('\'') => self.single_quoted(2),
            '$' if self.runs_a_command_at_brace() => self.funsub(),
            '$' | '<' | '>' if self.peek(1) == Some('(') => {
                self.push(c);
                self.push('(');
                self.at += 2;
                self.open(LevelKind::Paren, true);
            }
            '`' => self.backtick(),
            '(' => {
                self.at += 1;
                if self.peek(0) == Some('(') {
                    // `((…))` is arithmetic, where `<<` is a shift, not a
                    // here-document: splitting it as commands could hide one.
                    self.out.uncertain = true;
                }
                self.open(LevelKind::Paren, false);
            }
            ')' => {
                self.at += 1;
                if self.level().kind == LevelKind::Paren {
                    self.close(")");
                } else {
                    // Unbalanced (a `case` pattern, or a syntax error):
                    // whatever follows is another command.
                    self.end_command(")");
                }
            }
            '#' if after == After::Break => {
                self.after = After::Break;
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.at += 1;
                }
            }
            '&' if after == After::Redirect || self.peek(1) == Some('>') => {
                // Part of a redirection: `2>&1`, `<&0`, `&> file`.
                self.push(c);
                self.at += 1;
            }
            '|' if after == After::Redirect => {
                self.push(c);
                self.at += 1;
            }
            ';' | '&' | '|' => {
                self.at += 1;
                self.end_command(&c.to_string());
                self.after = After::Break;
            }
            '\n' => {
                self.at += 1;
                self.end_command("\n");
                self.here_doc_bodies();
                self.after = After::Break;
            }
            '>' => {
                if self.redirects_into_file() {
                    self.level().writes_file = true;
                }
                self.push(c);
                self.at += 1;
                self.after = After::Redirect;
            }
            '<' if self.peek(1) == Some('<') && self.peek(2) == Some('<') => {
                self.push_str("<<<");
                self.at += 3;
            }
            '<' if self.peek(1) == Some('<') => {
                self.push_str("<<");
                self.at += 2;
                self.here_doc_operator();
            }
            '<' => {
                self.push(c);
                self.at += 1;
                self.after = After::Redirect;
            }
            _ => {
                self.push(c);
                self.at += 1;
            }
        }
    }

    fn backslash(&mut self) {
        match self.peek(1) {
            Some('\n') => self.at += 2,
            Some(next) => {
                self.push('\\');
                self.push(next);
                self.at += 2;
            }
            None => {
                self.push('\\');
                self.at += 1;
            }
        }
    }

    /// `'…'`, or with `skip` 2 `$'…'`, where a backslash escapes the quote.
    fn single_quoted(&mut self, skip: usize) {
        let ansi_c = skip == 2;
        for _ in 0..skip {
            self.push(self.chars[self.at]);
            self.at += 1;
        }
        while let Some(c) = self.peek(0) {
            self.push(c);
            self.at += 1;
            if c == '\'' {
                return;
            }
            if ansi_c && c == '\\' {
                if let Some(next) = self.peek(0) {
                    self.push(next);
                    self.at += 1;
                }
            }
        }
        self.out.uncertain = true;
    }

    fn backtick(&mut self) {
        self.at += 1;
        if self.level().kind == LevelKind::Backtick {
            self.close("`");
        } else {
            self.push('`');
            self.open(LevelKind::Backtick, true);
        }
    }

    /// At a `>`: whether the redirection writes a file, as opposed to
    /// `/dev/null` or a descriptor (`>&2`, `2>&1`, `>&-`).
    fn redirects_into_file(&self) -> bool {
        let mut i = self.at + 1;
        if matches!(self.chars.get(i), Some('>' | '|')) {
            i += 1;
        }
        let duplicates = self.chars.get(i) == Some(&'&');
        if duplicates {
            i += 1;
        }
        while matches!(self.chars.get(i), Some(' ' | '\t')) {
            i += 1;
        }
        let target: String = self.chars[i.min(self.chars.len())..]
            .iter()
            .take_while(|c| !is_meta(**c))
            .collect();
        let descriptor =
            !target.is_empty() && target.chars().all(|c| c.is_ascii_digit() || c == '-');
        !(target == "/dev/null" || duplicates && descriptor)
    }

    /// After `<<`: reads the delimiter (without consuming it; it stays part
    /// of the command's text) and remembers the here-document whose body
    /// starts on the next line.
    fn here_doc_operator(&mut self) {
        let mut i = self.at;
        let strip_tabs = self.chars.get(i) == Some(&'-');
        if strip_tabs {
            i += 1;
        }
        while matches!(self.chars.get(i), Some(' ' | '\t')) {
            i += 1;
        }
        let mut delimiter = String::new();
        let mut quoted = false;
        while let Some(&c) = self.chars.get(i) {
            match c {
                '\'' | '"' => {
                    quoted = true;
                    i += 1;
                    while let Some(&q) = self.chars.get(i) {
                        i += 1;
                        if q == c {
                            break;
                        }
                        delimiter.push(q);
                    }
                }
                '\\' => {
                    quoted = true;
                    if let Some(&next) = self.chars.get(i + 1) {
                        delimiter.push(next);
                    }
                    i += 2;
                }
                c if is_meta(c) => break,
                c => {
                    delimiter.push(c);
                    i += 1;
                }
            }
        }
        if delimiter.is_empty() {
            self.out.uncertain = true;
            return;
        }
        self.here_docs.push(HereDoc {
            delimiter,
            strip_tabs,
            expands: !quoted,
        });
    }

    /// Right after a newline: skips the bodies of the here-documents opened
    /// on the line before. Their text is data, not commands — unless it is
    /// expanded and contains a substitution.
    fn here_doc_bodies(&mut self) {
        for doc in std::mem::take(&mut self.here_docs) {
            loop {
                if self.at >= self.chars.len() {
                    self.out.uncertain = true;
                    return;
                }
                let end = self.chars[self.at..]
                    .iter()
                    .position(|c| *c == '\n')
                    .map_or(self.chars.len(), |n| self.at + n);
                let line: String = self.chars[self.at..end].iter().collect();
                self.at = (end + 1).min(self.chars.len());
                let line = if doc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if line == doc.delimiter {
                    break;
                }
                if doc.expands && (line.contains("$(") || line.contains('`')) {
                    self.out.substitution = true;
                }
            }
        }
    }
}

/// How bash reads one character of a command's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Unquoted and unescaped: blanks here separate words.
    Plain,
    /// Inside quotes or escaped by a backslash: literal.
    Quoted,
    /// A quote or an escaping backslash: removed by bash.
    Syntax,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    Single,
    /// `$'…'`, where a backslash escapes.
    AnsiC,
    Double,
}

/// The role of each character of `text`, with its byte offset.
fn roles(text: &str) -> Vec<(usize, char, Role)> {
    let mut out = Vec::with_capacity(text.len());
    let mut quote: Option<Quote> = None;
    let mut escaped = false;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|(_, n)| *n);
        let role = if escaped {
            escaped = false;
            Role::Quoted
        } else {
            match (quote, c) {
                (Some(Quote::Single), '\'')
                | (Some(Quote::AnsiC), '\'')
                | (Some(Quote::Double), '"') => {
                    quote = None;
                    Role::Syntax
                }
                (Some(Quote::AnsiC), '\\') => {
                    escaped = true;
                    Role::Syntax
                }
                (Some(Quote::Double), '\\')
                    if matches!(next, Some('$' | '`' | '"' | '\\' | '\n')) =>
                {
                    escaped = true;
                    Role::Syntax
                }
                (Some(_), _) => Role::Quoted,
                (None, '\\') => {
                    escaped = true;
                    Role::Syntax
                }
                (None, '\'') => {
                    quote = Some(Quote::Single);
                    Role::Syntax
                }
                (None, '"') => {
                    quote = Some(Quote::Double);
                    Role::Syntax
                }
                (None, '$') if next == Some('\'') => {
                    chars.next();
                    out.push((i, c, Role::Syntax));
                    out.push((i + 1, '\'', Role::Syntax));
                    quote = Some(Quote::AnsiC);
                    continue;
                }
                (None, _) => Role::Plain,
            }
        };
        out.push((i, c, role));
    }
    out
}

/// Trims `text` and collapses runs of spaces and tabs outside quotes to one
/// space, so `git  status` and `git status` are the same command. Inner
/// newlines are kept: they separate commands.
pub fn collapse(text: &str) -> String {
    let text = text.trim();
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for (_, c, role) in roles(text) {
        if role == Role::Plain && matches!(c, ' ' | '\t') {
            blank = true;
            continue;
        }
        if blank {
            out.push(' ');
            blank = false;
        }
        out.push(c);
    }
    out
}

/// `text` with its quotes and escaping backslashes removed, as the program
/// sees its words: `"rm" -rf` and `r\m -rf` are `rm -rf`. Deny rules are
/// also tried on this form.
pub fn dequote(text: &str) -> String {
    roles(text)
        .into_iter()
        .filter(|(_, _, role)| *role != Role::Syntax)
        .map(|(_, c, _)| c)
        .collect()
}

/// The first word of a simple command's text, quotes respected.
pub fn first_word(text: &str) -> &str {
    roles(text)
        .into_iter()
        .find(|(_, c, role)| *role == Role::Plain && *c == ' ')
        .map_or(text, |(i, _, _)| &text[..i])
}

/// Whether `text` matches `pattern`, where `*` stands for any run of
/// characters (none included), `\` makes the character after it (`*`, `?`,
/// `[` or `\`) stand for itself, and every other character stands for
/// itself. A pattern ending in ` *` also matches without that tail:
/// `cargo *` allows `cargo` alone.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let tokens = tokens(pattern);
    star_match(&tokens, text)
        || matches!(tokens.as_slice(), [head @ .., Token::Char(' '), Token::Star] if star_match(head, text))
}

/// The characters a session rule escapes in a command so that they match
/// only themselves: the wildcard, the characters other glob dialects treat
/// as wildcards, and the escape itself.
pub(crate) const ESCAPED: [char; 4] = ['*', '?', '[', '\\'];

/// `text` as a pattern that matches exactly `text`: its `*`, `?`, `[` and
/// `\` escaped with `\`.
pub fn escape_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if ESCAPED.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Star,
    Char(char),
}

/// A pattern's wildcards and literal characters. A `\` before one of
/// [`ESCAPED`] makes it literal; any other `\` is itself.
fn tokens(pattern: &str) -> Vec<Token> {
    let mut out = Vec::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some(&next) if ESCAPED.contains(&next) => {
                    chars.next();
                    out.push(Token::Char(next));
                }
                _ => out.push(Token::Char('\\')),
            },
            '*' => out.push(Token::Star),
            c => out.push(Token::Char(c)),
        }
    }
    out
}

/// The classic linear-time `*` matcher: on a mismatch, let the last `*`
/// swallow one more character and retry from there.
fn star_match(p: &[Token], text: &str) -> bool {
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == Token::Star {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == Token::Char(t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == Token::Star)
}

/// Programs whose first argument names a subcommand: a session rule for
/// `git status --short` is `git status *`, never `git *`.
const TAKES_SUBCOMMAND: [&str; 28] = [
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "deno",
    "go",
    "docker",
    "podman",
    "kubectl",
    "helm",
    "make",
    "just",
    "gh",
    "pip",
    "pip3",
    "uv",
    "poetry",
    "rustup",
    "dotnet",
    "mvn",
    "gradle",
    "terraform",
    "systemctl",
    "brew",
    "apt",
    "npx",
];

/// The pattern a `session` answer adds for `line` (already collapsed): the
/// simple command's first word and ` *` — its first two words when the
/// first takes a subcommand (`git status *`), its first three for
/// `python -m MODULE` — with the command's own wildcards escaped; the whole
/// line, escaped, when it is compound, contains a substitution, writes a
/// file or is uncertain (a first-word rule would not cover it), and when
/// the word after a program that takes a subcommand is an option (`git -C
/// dir …`: which subcommand runs is not its second word). Leading
/// assignments are not the program: they are kept, and the words are
/// counted from the program after them (`LC_ALL=C ls -l` adds `LC_ALL=C ls
/// *`, never `LC_ALL=C *`); a line of assignments alone adds itself.
pub fn session_pattern(line: &str) -> String {
    let parsed = parse(line);
    let exact = || escape_pattern(line);
    let [only] = parsed.commands.as_slice() else {
        return exact();
    };
    if parsed.substitution || parsed.uncertain || only.writes_file {
        return exact();
    }
    let program_at = assignments_len(&only.text);
    let (assignments, command) = only.text.split_at(program_at);
    let mut words = Vec::new();
    let mut rest = command;
    while !rest.is_empty() && words.len() < 3 {
        let word = first_word(rest);
        words.push(word);
        rest = rest[word.len()..].trim_start();
    }
    let Some(&program) = words.first() else {
        return exact();
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    let is_python = name.starts_with("python") && words.get(1) == Some(&"-m");
    let taken = if is_python {
        3
    } else if TAKES_SUBCOMMAND.contains(&name) {
        2
    } else {
        1
    };
    if words.len() < taken
        || words[1..taken]
            .iter()
            .any(|w| w.starts_with('-') && *w != "-m")
    {
        return exact();
    }
    let head = words[..taken].join(" ");
    format!("{} *", escape_pattern(&format!("{assignments}{head}")))
}

/// Whether `word` is a `NAME=value` assignment: before a command, bash
/// sets it in the command's environment and runs the word after it.
pub fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The length of the leading assignments of a simple command's `text`
/// (collapsed), each with the blank after it: where its program word
/// starts. All of `text` when it is assignments alone.
pub fn assignments_len(text: &str) -> usize {
    let mut at = 0;
    while at < text.len() {
        let word = first_word(&text[at..]);
        if !is_assignment(word) {
            break;
        }
        at += word.len();
        at += usize::from(text[at..].starts_with(' '));
    }
    at
}

/// Whether a rule's `pattern` spells out the leading assignments and the
/// program word of `text` (a simple command it matches) before any `*`,
/// so that no wildcard stands for the program: `LC_ALL=C *` matches
/// `LC_ALL=C rm -rf ~` as text, but the assignment is not the program, and
/// the rule must not allow it. A command without assignments is not held
/// to this (its program is the first word a rule names anyway).
pub fn names_the_program(pattern: &str, text: &str) -> bool {
    let assignments = assignments_len(text);
    if assignments == 0 {
        return true;
    }
    let literal: String = tokens(pattern)
        .into_iter()
        .map_while(|token| match token {
            Token::Char(c) => Some(c),
            Token::Star => None,
        })
        .collect();
    let program = first_word(&text[assignments..]);
    literal.len() >= assignments + program.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<String> {
        parse(line).commands.into_iter().map(|c| c.text).collect()
    }

    #[test]
    fn splits_on_every_separator() {
        assert_eq!(
            texts("a 1; b 2 && c || d | e & f\ng"),
            ["a 1", "b 2", "c", "d", "e", "f", "g"]
        );
        assert_eq!(texts("make &"), ["make"]);
        assert_eq!(texts("a |& b"), ["a", "b"]);
    }

    #[test]
    fn quotes_and_escapes_hide_separators() {
        assert_eq!(texts(r#"echo "a;b" 'c && d'"#), [r#"echo "a;b" 'c && d'"#]);
        assert_eq!(texts(r"echo a\;b\|c"), [r"echo a\;b\|c"]);
        assert_eq!(texts(r#"echo "say \"x; y\"""#), [r#"echo "say \"x; y\"""#]);
        assert_eq!(texts("echo 'it\\'; rm x"), ["echo 'it\\'", "rm x"]);
    }

    #[test]
    fn ansi_c_quotes_end_where_bash_ends_them() {
        // `$'\''` is one quote character; what follows is a real command.
        let line = r"git status $'\'' ; rm -rf ~ #'";
        let parsed = parse(line);
        assert_eq!(texts(line), [r"git status $'\''", "rm -rf ~"], "{parsed:?}");
        assert!(!parsed.uncertain);
    }

    #[test]
    fn whitespace_collapses_outside_quotes_only() {
        assert_eq!(texts("  git \t status   -s  "), ["git status -s"]);
        assert_eq!(texts("echo 'a   b'"), ["echo 'a   b'"]);
        assert_eq!(collapse("a  \"b  c\"  d"), "a \"b  c\" d");
    }

    #[test]
    fn a_brace_that_runs_a_command_is_a_substitution() {
        for line in [
            "echo ${ rm -rf x; }",
            "echo ${| REPLY=$(id); }",
            "echo \"${\trm x;}\"",
            "echo ${(x)}",
        ] {
            assert!(parse(line).substitution, "{line}");
        }
        for line in [
            "echo ${HOME}",
            "echo ${#x} ${!p} ${@} ${x:-a} \"${1}\"",
            "echo '${ x; }'",
        ] {
            assert!(!parse(line).substitution, "{line}");
        }
    }

    #[test]
    fn substitution_is_flagged_and_its_commands_split_out() {
        for line in [
            "git status $(rm x)",
            "echo `rm x`",
            "diff <(ls a) b",
            "tee >(rm x)",
            "echo \"$(rm x)\"",
            "echo \"`rm x`\"",
        ] {
            let parsed = parse(line);
            assert!(parsed.substitution, "{line}");
            assert!(
                parsed
                    .commands
                    .iter()
                    .any(|c| c.text.starts_with("rm x") || c.text == "ls a"),
                "{line}: {parsed:?}"
            );
        }
        assert_eq!(
            texts("echo $(date; rm x) done"),
            ["date", "rm x", "echo $(date; rm x) done"]
        );
    }

    #[test]
    fn single_quotes_and_escapes_hide_substitution() {
        for line in [
            "echo '$(rm x)'",
            "echo '`rm`'",
            r"echo \$(rm x)",
            r"echo \`x\`",
        ] {
            assert!(!parse(line).substitution, "{line}");
        }
    }

    #[test]
    fn subshells_and_keywords_leave_the_commands() {
        assert_eq!(texts("(cd src; make)"), ["cd src", "make"]);
        assert_eq!(
            texts("if git status; then rm -rf x; else echo no; fi"),
            ["git status", "rm -rf x", "echo no"]
        );
        assert_eq!(texts("{ a; b; }"), ["a", "b"]);
        assert_eq!(
            texts("while true\ndo\n  sleep 1\ndone"),
            ["true", "sleep 1"]
        );
        assert_eq!(texts("! grep x f"), ["grep x f"]);
        assert_eq!(texts("'fi'"), ["'fi'"]);
    }

    #[test]
    fn redirections_stay_in_the_command() {
        let parsed = parse("cargo test 2>&1 | tee log > out.txt");
        assert_eq!(
            parsed.commands,
            [
                SimpleCommand {
                    text: "cargo test 2>&1".into(),
                    writes_file: false
                },
                SimpleCommand {
                    text: "tee log > out.txt".into(),
                    writes_file: true
                },
            ]
        );
        for (line, writes) in [
            ("ls > /dev/null", false),
            ("ls 2>/dev/null >&2", false),
            ("ls &>/dev/null", false),
            ("ls >&-", false),
            ("ls < in.txt", false),
            ("ls >> log", true),
            ("ls &> log", true),
            ("ls >| log", true),
            ("ls >&log", true),
            ("ls 2> err", true),
            ("exec 3<> file", true),
            ("echo '>' x", false),
            ("echo \"a > b\"", false),
        ] {
            let parsed = parse(line);
            assert_eq!(parsed.commands.len(), 1, "{line}: {parsed:?}");
            assert_eq!(parsed.commands[0].writes_file, writes, "{line}");
        }
    }

    #[test]
    fn comments_are_dropped() {
        assert_eq!(texts("git status # ; rm -rf ~"), ["git status"]);
        assert_eq!(texts("echo a#b; ls"), ["echo a#b", "ls"]);
        assert_eq!(texts("# only a comment"), Vec::<String>::new());
    }

    #[test]
    fn escaped_characters_do_not_act_as_syntax() {
        // `\ ` is part of the word, so `#` starts no comment and `;` splits.
        assert_eq!(
            texts(r"git status\ #; rm -rf ~"),
            [r"git status\ #", "rm -rf ~"]
        );
        // After `\>` the `&` is an operator, not part of a redirection.
        assert_eq!(
            texts(r"git status \>& rm -rf ~"),
            [r"git status \>", "rm -rf ~"]
        );
        // A continuation joins `status` and `#`: one word, no comment.
        assert_eq!(texts("git status\\\n#; rm"), ["git status#", "rm"]);
        assert_eq!(texts("git status \\\n# a comment"), ["git status"]);
    }

    #[test]
    fn arithmetic_is_uncertain() {
        assert!(parse("((x<<2))\nrm -rf ~\n2").uncertain);
        assert!(!parse("( (a) )").uncertain);
    }

    #[test]
    fn dequoting_and_first_words_follow_bash_quoting() {
        assert_eq!(dequote(r#""rm" -rf 'a b' c\ d"#), "rm -rf a b c d");
        assert_eq!(dequote(r"$'it\'s'"), "it's");
        assert_eq!(collapse(r"echo $'a\'  b'   c"), r"echo $'a\'  b' c");
    }

    #[test]
    fn line_continuations_join_lines() {
        assert_eq!(texts("cargo \\\n  test"), ["cargo test"]);
    }

    #[test]
    fn here_document_bodies_are_data() {
        let parsed = parse("cat > notes.md <<'EOF'\nrm -rf ~; $(x)\nEOF\nls");
        assert_eq!(
            parsed
                .commands
                .iter()
                .map(|c| c.text.as_str())
                .collect::<Vec<_>>(),
            ["cat > notes.md <<'EOF'", "ls"]
        );
        assert!(!parsed.substitution && !parsed.uncertain);
        let expanded = parse("cat <<EOF\n$(rm x)\nEOF");
        assert!(expanded.substitution);
        let indented = parse("cat <<-END\n\tbody\n\tEND\necho done");
        assert_eq!(indented.commands.len(), 2, "{indented:?}");
        assert!(parse("cat <<EOF\nno end").uncertain);
        assert_eq!(texts("cat <<< 'a; b'"), ["cat <<< 'a; b'"]);
    }

    #[test]
    fn unterminated_input_is_uncertain() {
        for line in ["echo 'a", "echo \"a", "echo $(a", "echo `a", "(a; b"] {
            assert!(parse(line).uncertain, "{line}");
        }
        assert!(!parse("echo 'a' \"b\" $(c) `d` (e)").uncertain);
    }

    #[test]
    fn wildcard_matching() {
        assert!(wildcard_match("git status*", "git status"));
        assert!(wildcard_match("git status*", "git status -s"));
        assert!(!wildcard_match("git status*", "git stash"));
        assert!(wildcard_match("cargo *", "cargo"));
        assert!(wildcard_match("cargo *", "cargo test --lib"));
        assert!(!wildcard_match("cargo *", "cargoX"));
        assert!(wildcard_match("npm run * --watch", "npm run dev --watch"));
        assert!(!wildcard_match("npm run * --watch", "npm run dev"));
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("a*b*c", "a-x-b-y-c"));
        assert!(!wildcard_match("a*b*c", "a-x-c-y-b"));
        assert!(!wildcard_match("ls", "ls -la"));
        assert!(wildcard_match("ls ?", "ls ?"));
        assert!(!wildcard_match("ls ?", "ls a"), "`?` is literal");
        assert!(wildcard_match(r"echo \*", "echo *"));
        assert!(
            !wildcard_match(r"echo \*", "echo x"),
            "an escaped `*` is itself"
        );
        assert!(wildcard_match(r"a\\b", r"a\b"));
        assert!(
            wildcard_match(r"grep a\|b *", r"grep a\|b src"),
            "other `\\` stay"
        );
        assert!(
            !wildcard_match(r"rm \*", "rm"),
            "an escaped star is no optional tail"
        );
    }

    #[test]
    fn session_patterns_name_the_program_or_its_subcommand() {
        assert_eq!(session_pattern("git status --short"), "git status *");
        assert_eq!(session_pattern("cargo test --lib"), "cargo test *");
        assert_eq!(session_pattern("ls -la src"), "ls *");
        assert_eq!(
            session_pattern("python3 -m pytest -x"),
            "python3 -m pytest *"
        );
        assert_eq!(session_pattern("python3 app.py"), "python3 *");
        assert_eq!(session_pattern("/usr/bin/git log"), "/usr/bin/git log *");
        assert_eq!(session_pattern("git -C /x push"), "git -C /x push");
        assert_eq!(session_pattern("git"), "git");
        assert_eq!(session_pattern("*"), r"\* *");
        assert_eq!(session_pattern("rm -rf *"), "rm *");
        assert_eq!(session_pattern("l? x"), r"l\? *");
        assert_eq!(
            session_pattern("git status; rm -rf x"),
            "git status; rm -rf x"
        );
        assert_eq!(session_pattern("echo * > out"), r"echo \* > out");
        assert!(wildcard_match(&session_pattern("*"), "*"));
        // Issue 35 item 13: an assignment is not the program.
        assert_eq!(session_pattern("LC_ALL=C ls -la"), "LC_ALL=C ls *");
        assert_eq!(
            session_pattern("A=1 B='x y' git status"),
            "A=1 B='x y' git status *"
        );
        assert_eq!(session_pattern("A=1"), "A=1");
        assert_eq!(session_pattern("A=* ls"), r"A=\* ls *");
        assert!(!wildcard_match(&session_pattern("*"), "rm -rf /"));
    }

    #[test]
    fn first_words() {
        assert_eq!(first_word("cargo test"), "cargo");
        assert_eq!(first_word("\"my prog\" x"), "\"my prog\"");
        assert_eq!(first_word(r"my\ prog x"), r"my\ prog");
        assert_eq!(first_word("ls"), "ls");
    }
}
