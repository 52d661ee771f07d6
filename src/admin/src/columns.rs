//! Tab-separated rows printed as aligned columns.

/// Prints `rows` (cells separated by tabs) with each column padded to its
/// widest cell, two spaces apart.
pub fn print(rows: &[String]) {
    print!("{}", format(rows));
}

pub fn format(rows: &[String]) -> String {
    let cells: Vec<Vec<&str>> = rows.iter().map(|r| r.split('\t').collect()).collect();
    let cols = cells.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            cells
                .iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in cells {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < row.len() {
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligns_columns() {
        let t = super::format(&["ID\tZone".into(), "abcdef\tdc1".into(), "x\t\tlast".into()]);
        assert_eq!(t, "ID      Zone\nabcdef  dc1\nx             last\n");
    }
}
