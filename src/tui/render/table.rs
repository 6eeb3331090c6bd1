//! Markdown tables as tables: aligned columns, cells wrapped inside their
//! column, and on a terminal too narrow for the columns one `key: value`
//! block per row instead of a table nobody can read.

use pulldown_cmark::Alignment;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

use super::wrap::wrap;

/// One cell's content: styled inline text on one logical line.
pub type Cell = Vec<Span<'static>>;

/// Below this many columns for a cell that wants more, the table becomes
/// `key: value` blocks: a column of three-letter rows is not a table.
const MIN_COLUMN: usize = 8;
const SEPARATOR: &str = " │ ";
const DIM: Style = Style::new().add_modifier(Modifier::DIM);

/// A parsed table: the header row, the body rows and each column's
/// alignment. Rows may have fewer cells than the header (missing ones are
/// empty) — or more, which are dropped, as CommonMark tables do.
#[derive(Debug, Default)]
pub struct Table {
    pub alignments: Vec<Alignment>,
    pub head: Vec<Cell>,
    pub rows: Vec<Vec<Cell>>,
}

fn width_of(cell: &Cell) -> usize {
    cell.iter().map(|s| s.content.width()).sum()
}

impl Table {
    fn columns(&self) -> usize {
        self.alignments.len().max(self.head.len())
    }

    /// The table's rows at `width` columns.
    pub fn render(&self, width: usize, out: &mut Vec<Line<'static>>) {
        let n = self.columns();
        if n == 0 {
            return;
        }
        let natural: Vec<usize> = (0..n)
            .map(|i| {
                std::iter::once(&self.head)
                    .chain(&self.rows)
                    .filter_map(|row| row.get(i))
                    .map(width_of)
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        let avail = width.saturating_sub(SEPARATOR.width() * (n - 1));
        let needed: usize = natural.iter().map(|w| (*w).min(MIN_COLUMN)).sum();
        if avail < needed {
            self.render_blocks(width, out);
            return;
        }
        let widths = fit(&natural, avail);
        let head_style = Style::new().add_modifier(Modifier::BOLD);
        let head: Vec<Cell> = self
            .head
            .iter()
            .map(|cell| {
                cell.iter()
                    .map(|s| Span::styled(s.content.clone(), s.style.patch(head_style)))
                    .collect()
            })
            .collect();
        let body: Vec<Vec<Vec<Line<'static>>>> = self
            .rows
            .iter()
            .map(|row| self.wrap_row(row, &widths))
            .collect();
        let wrapped = body.iter().any(|cells| cells.iter().any(|c| c.len() > 1));
        let rule = Line::styled(
            widths
                .iter()
                .map(|w| "─".repeat(*w))
                .collect::<Vec<_>>()
                .join("─┼─"),
            DIM,
        );
        self.emit(&self.wrap_row(&head, &widths), &widths, out);
        out.push(rule.clone());
        for (i, cells) in body.iter().enumerate() {
            if wrapped && i > 0 {
                out.push(rule.clone());
            }
            self.emit(cells, &widths, out);
        }
    }

    fn wrap_row(&self, row: &[Cell], widths: &[usize]) -> Vec<Vec<Line<'static>>> {
        widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mut lines = Vec::new();
                if let Some(cell) = row.get(i).filter(|c| width_of(c) > 0) {
                    wrap(cell, *w, &[], &[], &mut lines);
                }
                for line in &mut lines {
                    trim_end(line);
                }
                lines
            })
            .collect()
    }

    /// One table row: as many screen rows as its tallest cell, each cell
    /// padded to its column by its alignment.
    fn emit(&self, cells: &[Vec<Line<'static>>], widths: &[usize], out: &mut Vec<Line<'static>>) {
        let height = cells.iter().map(Vec::len).max().unwrap_or(0).max(1);
        for r in 0..height {
            let mut spans = Vec::new();
            for (i, w) in widths.iter().enumerate() {
                if i > 0 {
                    spans.push(Span::styled(SEPARATOR, DIM));
                }
                let line = cells.get(i).and_then(|c| c.get(r));
                let content: Vec<Span<'static>> = line.map(|l| l.spans.clone()).unwrap_or_default();
                let used: usize = content.iter().map(|s| s.content.width()).sum();
                let pad = w.saturating_sub(used);
                let (left, right) = match self.alignments.get(i) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                if left > 0 {
                    spans.push(Span::raw(" ".repeat(left)));
                }
                spans.extend(content);
                // The last column needs no trailing padding.
                if right > 0 && i + 1 < widths.len() {
                    spans.push(Span::raw(" ".repeat(right)));
                }
            }
            out.push(Line::from(spans));
        }
    }

    /// The narrow form: per row, `header: value` lines, rows apart.
    fn render_blocks(&self, width: usize, out: &mut Vec<Line<'static>>) {
        let key_style = Style::new().add_modifier(Modifier::BOLD);
        for (r, row) in self.rows.iter().enumerate() {
            if r > 0 {
                out.push(Line::default());
            }
            for (i, cell) in row.iter().enumerate().take(self.columns()) {
                let key: String = self
                    .head
                    .get(i)
                    .map(|h| h.iter().map(|s| s.content.as_ref()).collect())
                    .unwrap_or_default();
                let first = [Span::styled(format!("{key}: "), key_style)];
                wrap(cell, width, &first, &[Span::raw("  ")], out);
            }
        }
    }
}

/// Drops the space a row was broken after, so that alignment counts only
/// what shows.
fn trim_end(line: &mut Line<'static>) {
    while let Some(last) = line.spans.last_mut() {
        let trimmed = last.content.trim_end();
        if trimmed.is_empty() {
            line.spans.pop();
        } else {
            if trimmed.len() != last.content.len() {
                last.content = trimmed.to_owned().into();
            }
            return;
        }
    }
}

/// Column widths for `natural` widths in `avail` columns: columns that fit
/// in an equal share keep their width, the rest split what is left.
fn fit(natural: &[usize], avail: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= avail {
        return natural.to_vec();
    }
    let mut widths = vec![0; natural.len()];
    let mut open: Vec<usize> = (0..natural.len()).collect();
    let mut remaining = avail;
    while !open.is_empty() {
        let share = remaining / open.len();
        let (small, big): (Vec<usize>, Vec<usize>) =
            open.iter().partition(|&&i| natural[i] <= share);
        if small.is_empty() {
            let extra = remaining % open.len();
            for (k, &i) in open.iter().enumerate() {
                widths[i] = share + usize::from(k < extra);
            }
            break;
        }
        for &i in &small {
            widths[i] = natural[i];
            remaining -= natural[i];
        }
        open = big;
    }
    widths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_columns_keep_their_width_and_wide_ones_share() {
        assert_eq!(fit(&[3, 10], 20), [3, 10]);
        assert_eq!(fit(&[3, 30, 30], 23), [3, 10, 10]);
        assert_eq!(fit(&[30, 30, 30], 31), [11, 10, 10]);
    }

    fn table(rows: &[&[&str]]) -> Table {
        let cell = |s: &&str| vec![Span::raw((*s).to_owned())];
        Table {
            alignments: vec![Alignment::None, Alignment::Right],
            head: rows[0].iter().map(cell).collect(),
            rows: rows[1..]
                .iter()
                .map(|r| r.iter().map(cell).collect())
                .collect(),
        }
    }

    fn rows(t: &Table, width: usize) -> Vec<String> {
        let mut out = Vec::new();
        t.render(width, &mut out);
        out.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn columns_align_and_cells_wrap() {
        let t = table(&[&["name", "n"], &["a", "1"], &["bb", "22"]]);
        assert_eq!(
            rows(&t, 40),
            ["name │  n", "─────┼───", "a    │  1", "bb   │ 22"]
        );
        let t = table(&[&["key", "value"], &["a", "one two three four"], &["b", "x"]]);
        assert_eq!(
            rows(&t, 14),
            [
                "key │    value",
                "────┼─────────",
                "a   │  one two",
                "    │    three",
                "    │     four",
                "────┼─────────",
                "b   │        x",
            ]
        );
    }

    #[test]
    fn too_narrow_becomes_key_value_blocks() {
        let t = table(&[&["first", "second"], &["a long value", "b"], &["c", "d"]]);
        assert_eq!(
            rows(&t, 12),
            [
                "first: a ",
                "  long value",
                "second: b",
                "",
                "first: c",
                "second: d"
            ]
        );
    }
}
