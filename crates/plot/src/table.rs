//! Plain-text tables with aligned columns: how results print on a terminal (`pspat run`'s
//! live table and account, the benchmarks' and the experiment kit's tables).

/// Renders `rows` under `headers`, columns separated by two spaces; columns listed in
/// `right` are right-aligned (numbers).
pub fn render(headers: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = w - cell.chars().count();
            if right.contains(&i) {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            } else {
                s.push_str(cell);
                if i + 1 < cells.len() {
                    s.push_str(&" ".repeat(pad));
                }
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let t = render(
            &["alg", "ns"],
            &[
                vec!["fifo".into(), "5.1".into()],
                vec!["wf2q+".into(), "123.4".into()],
            ],
            &[1],
        );
        assert_eq!(t, "alg       ns\nfifo     5.1\nwf2q+  123.4\n");
    }
}
