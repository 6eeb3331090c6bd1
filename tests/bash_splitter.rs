//! The splitter that guards every `bash:` allow rule, against a maintained
//! bash parser (`brush-parser`): on any line that parser reads as more
//! simple commands than ours lists, ours must say it cannot vouch for the
//! line (uncertain, or a substitution), so that no allow rule covers it —
//! a command we did not list is a command no rule was matched against.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use brush_parser::ast::{
    Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectTarget,
    IoRedirect, Pipeline, Program,
};
use brush_parser::{Parser, ParserOptions};
use pod::approval::fuzzing::split;
use proptest::prelude::*;

/// How many simple commands brush finds in `line`, `None` when it does not
/// parse it (then bash would refuse to run it too).
fn brush_commands(line: &str) -> Option<usize> {
    if unfinished_here_doc(line) {
        return None;
    }
    let options = ParserOptions::default();
    let program: Program = Parser::new(std::io::Cursor::new(line), &options)
        .parse_program()
        .ok()?;
    Some(program.complete_commands.iter().map(in_list).sum())
}

/// Whether a `<<` (not `<<<`) has no line after it for its body: brush
/// 0.4 then allocates without bound looking for the end tag (`>( $(<<
/// ((<esac` asked it for 1.8 GB), and bash would read the rest of the
/// script as the body. Our splitter calls such a line uncertain.
fn unfinished_here_doc(line: &str) -> bool {
    line.match_indices("<<").any(|(at, _)| {
        let rest = &line[at + 2..];
        !rest.starts_with('<') && !line[..at].ends_with('<') && !rest.contains('\n')
    })
}

fn in_list(list: &CompoundList) -> usize {
    list.0
        .iter()
        .map(|item| {
            let and_or = &item.0;
            in_pipeline(&and_or.first)
                + and_or
                    .additional
                    .iter()
                    .map(|next| match next {
                        brush_parser::ast::AndOr::And(p) | brush_parser::ast::AndOr::Or(p) => {
                            in_pipeline(p)
                        }
                    })
                    .sum::<usize>()
        })
        .sum()
}

fn in_pipeline(pipeline: &Pipeline) -> usize {
    pipeline.seq.iter().map(in_command).sum()
}

fn in_items(items: &[CommandPrefixOrSuffixItem]) -> usize {
    items
        .iter()
        .map(|item| match item {
            CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => in_list(&sub.list),
            CommandPrefixOrSuffixItem::IoRedirect(IoRedirect::File(
                _,
                _,
                IoFileRedirectTarget::ProcessSubstitution(_, sub),
            )) => in_list(&sub.list),
            _ => 0,
        })
        .sum()
}

fn in_command(command: &Command) -> usize {
    match command {
        Command::Simple(simple) => {
            1 + simple.prefix.as_ref().map_or(0, |p| in_items(&p.0))
                + simple.suffix.as_ref().map_or(0, |s| in_items(&s.0))
        }
        Command::Compound(compound, _) => in_compound(compound),
        Command::Function(function) => in_compound(&function.body.0),
        Command::ExtendedTest(..) => 0,
    }
}

fn in_compound(compound: &CompoundCommand) -> usize {
    match compound {
        CompoundCommand::Arithmetic(_) => 0,
        CompoundCommand::ArithmeticForClause(c) => in_list(&c.body.list),
        CompoundCommand::BraceGroup(c) => in_list(&c.list),
        CompoundCommand::Subshell(c) => in_list(&c.list),
        CompoundCommand::ForClause(c) => in_list(&c.body.list),
        CompoundCommand::CaseClause(c) => c
            .cases
            .iter()
            .map(|case| case.cmd.as_ref().map_or(0, in_list))
            .sum(),
        CompoundCommand::IfClause(c) => {
            in_list(&c.condition)
                + in_list(&c.then)
                + c.elses
                    .iter()
                    .flatten()
                    .map(|e| e.condition.as_ref().map_or(0, in_list) + in_list(&e.body))
                    .sum::<usize>()
        }
        CompoundCommand::WhileClause(c) | CompoundCommand::UntilClause(c) => {
            in_list(&c.0) + in_list(&c.1.list)
        }
        CompoundCommand::Coprocess(c) => in_command(&c.body),
    }
}

/// Pieces a command line is made of: words, quotes, escapes, every
/// separator and the syntax around them.
const PIECES: &[&str] = &[
    "ls", "rm", "-rf", "x", "a=1", "\"a;b\"", "'c|d'", "\"", "'", "\\", "\\;", "#", "{", "}", "(",
    ")", "if", "then", "else", "fi", "while", "do", "done", "for", "in", "case", "esac", ";;",
    "$(", "`", "<(", ">(", ">", ">>", "<", "2>&1", "&>", "&", "&&", "||", "|", "|&", ";", "\n",
    "<<", "<<<", "EOF", "$x", "${x}", "${", "$'", "!", "[[", "]]", "((", "))", "function", "f()",
    "coproc", "time", "=", "$", "~",
];

fn line() -> impl Strategy<Value = String> {
    prop::collection::vec((0..PIECES.len(), prop::bool::ANY), 1..14).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(i, spaced)| {
                if spaced {
                    format!("{} ", PIECES[i])
                } else {
                    PIECES[i].to_owned()
                }
            })
            .collect()
    })
}

fn check(line: &str) -> Result<(), TestCaseError> {
    let Some(theirs) = brush_commands(line) else {
        return Ok(());
    };
    let ours = split(line);
    if ours.uncertain || ours.substitution {
        return Ok(());
    }
    prop_assert!(
        theirs <= ours.commands.len(),
        "{line:?}: brush reads {theirs} commands, ours lists {:?} and vouches for it",
        ours.commands
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]
    #[test]
    fn no_line_holds_more_commands_than_the_splitter_lists(line in line()) {
        check(&line)?;
    }
}

/// Lines the property found, and the classic ones, kept as cases.
#[test]
fn known_lines() {
    for line in [
        "git status; rm -rf x",
        "ls && rm x || echo y | cat & wait",
        "if ls; then rm x; fi",
        "(cd a; rm x)",
        "f() { rm x; }",
        "cat <<EOF\n$(rm x)\nEOF",
        "echo \"a;b\" 'c && d'",
    ] {
        check(line).unwrap_or_else(|e| panic!("{e}"));
    }
}
