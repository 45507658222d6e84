//! The rule stream: `add`, `delete`, `flush` and the `table` commands, applied to the
//! [`Draft`] in the order written, as ipfw applies a file of commands (a later `delete`
//! removes what an earlier `add` added; see `rule.rs` for the grammar).

use super::names::refused;
use super::parser::{Cursor, R};
use super::rule::{parse_prefix, rule, value_range};
use crate::model::*;
use crate::resolve::{Draft, Loc, Located, TableCmd, MAX_RULE};

/// `add ...`: a rule, numbered after the highest so far when it has no number.
pub(super) fn add(c: &mut Cursor<'_, '_>, d: &mut Draft, at: Loc, last: &mut u32) -> R<()> {
    let item = rule(c, *last)?;
    *last = (*last).max(item.number);
    d.rules.push(Located { item, at: Some(at) });
    Ok(())
}

/// The highest rule number in `d` (0 for none): where autonumbering goes on from.
fn highest(d: &Draft) -> u32 {
    d.rules.iter().map(|r| r.item.number).max().unwrap_or(0)
}

/// `flush`: deletes every rule so far.
pub(super) fn flush(c: &mut Cursor<'_, '_>, d: &mut Draft, last: &mut u32) -> R<()> {
    c.end()?;
    d.rules.clear();
    *last = 0;
    Ok(())
}

/// `delete N|LO-HI...`: deletes the rules so far with those numbers; a number that
/// names no rule is an error, as in ipfw.
pub(super) fn delete(c: &mut Cursor<'_, '_>, d: &mut Draft, last: &mut u32) -> R<()> {
    if c.peek_is("set") {
        return Err(c.err(refused("set").unwrap_or_default()));
    }
    let mut any = false;
    while let Some(t) = c.peek() {
        let r = c.with("a rule number or range (100, 100-200)", |s| {
            let r = value_range(s, MAX_RULE as u16, "a rule number")?;
            if r.lo == 0 {
                return Err(format!("rule numbers are 1..={MAX_RULE}"));
            }
            Ok(r)
        })?;
        let before = d.rules.len();
        let (lo, hi) = (u32::from(r.lo), u32::from(r.hi));
        d.rules.retain(|x| !(lo..=hi).contains(&x.item.number));
        if d.rules.len() == before {
            return Err(c.err_at(t, format!("no rule numbered {} to delete", t.text)));
        }
        any = true;
    }
    if !any {
        return Err(c.err("expected a rule number to delete"));
    }
    *last = highest(d);
    Ok(())
}

/// `table T ...`: creates a table, adds or deletes an entry, empties or destroys it.
pub(super) fn table(c: &mut Cursor<'_, '_>, d: &mut Draft, at: Loc) -> R<()> {
    let table = c.with("a table name or number", TableName::new)?;
    const OPS: &str = "expected `create`, `add`, `delete`, `flush` or `destroy`";
    let op = c.word(&OPS["expected ".len()..])?;
    let exists = |d: &Draft, t: &TableName| d.tables.iter().any(|x| x.item.table == *t);
    match op.text.to_ascii_lowercase().as_str() {
        "create" => {
            while let Some(t) = c.peek() {
                c.pos += 1;
                match t.text.to_ascii_lowercase().as_str() {
                    "type" => {
                        let ty = c.word("a table type")?;
                        if !ty.text.eq_ignore_ascii_case("addr") {
                            return Err(c.err_at(
                                ty,
                                "only `type addr` tables: pspat's tables map address \
                                 prefixes to numbers",
                            ));
                        }
                    }
                    _ => {
                        return Err(c.err_at(
                            t,
                            "expected `type addr` (the only table option pspat has: its \
                             tables map address prefixes to numbers)",
                        ))
                    }
                }
            }
            d.tables.push(Located {
                item: TableCmd { table, entry: None },
                at: Some(at),
            });
        }
        "add" => {
            let p = c.with("a prefix (1.2.3.0/24, 2001:db8::/32) or host", parse_prefix)?;
            let v = if c.peek().is_some() {
                c.number("a table value", 0, u32::MAX.into())? as u32
            } else {
                0
            };
            c.end()?;
            d.tables.push(Located {
                item: TableCmd {
                    table,
                    entry: Some((p, v)),
                },
                at: Some(at),
            });
        }
        "delete" => {
            let t = c.peek();
            let p = c.with("a prefix (1.2.3.0/24, 2001:db8::/32) or host", parse_prefix)?;
            c.end()?;
            let before = d.tables.len();
            d.tables
                .retain(|x| !(x.item.table == table && x.item.entry.is_some_and(|e| e.0 == p)));
            if d.tables.len() == before {
                let t = t.expect("a prefix was read");
                return Err(c.err_at(t, format!("table {table} has no entry {}", t.text)));
            }
        }
        "flush" | "destroy" => {
            c.end()?;
            if !exists(d, &table) {
                return Err(c.err_at(op, format!("table {table} does not exist")));
            }
            let destroy = op.text.eq_ignore_ascii_case("destroy");
            d.tables
                .retain(|x| x.item.table != table || (!destroy && x.item.entry.is_none()));
            if !destroy && !exists(d, &table) {
                // Emptied of entries: the table itself stays.
                d.tables.push(Located {
                    item: TableCmd { table, entry: None },
                    at: Some(at),
                });
            }
        }
        _ => return Err(c.err_at(op, OPS)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ipfw::parser::parse;
    use crate::model::Action;

    fn err(text: &str) -> String {
        parse(text, "t").unwrap_err().to_string()
    }

    #[test]
    fn the_rule_stream_applies_commands_in_order() {
        let d = parse(
            "add 100 allow ip from any to any\n\
             add 200 deny ip from any to any\n\
             add 300 count ip from any to any\n\
             delete 100 250-400\n\
             add allow ip from any to any\n\
             flush\n\
             add deny ip from any to any\n\
             table T1 create type addr\n\
             table T1 add 10.0.0.0/8 3\n\
             table T1 add 10.1.0.0/16\n\
             table T1 delete 10.1.0.0/16\n\
             table 2 add 1.2.3.4\n\
             table 2 flush\n\
             table 3 add 1.2.3.4\n\
             table 3 destroy\n",
            "t",
        )
        .unwrap();
        let rules: Vec<(u32, Action)> = d
            .rules
            .iter()
            .map(|r| (r.item.number, r.item.action))
            .collect();
        assert_eq!(rules, vec![(100, Action::Deny)]);
        let tables: Vec<(String, Option<u32>)> = d
            .tables
            .iter()
            .map(|t| (t.item.table.to_string(), t.item.entry.map(|e| e.1)))
            .collect();
        assert_eq!(
            tables,
            vec![
                ("T1".into(), None),
                ("T1".into(), Some(3)),
                ("2".into(), None)
            ]
        );
        assert_eq!(
            err("delete 7"),
            "t:1:8: no rule numbered 7 to delete (at `7`)"
        );
        assert_eq!(
            err("table 9 flush"),
            "t:1:9: table 9 does not exist (at `flush`)"
        );
        assert!(err("table 1 add 1.2.3.4\ntable 1 delete 1.2.3.5").contains("has no entry 1.2.3.5"));
        assert!(err("table 1 create type iface").contains("only `type addr`"));
    }
}
