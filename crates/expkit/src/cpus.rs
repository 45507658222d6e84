//! CPU lists, as `0,2,5-7`: the one parser of them in pspat (`udpgen --cpus`).

use std::str::FromStr;

use crate::error::CpuListError;

/// A list of CPU numbers, in the order written (`0,2,5-7` is 0, 2, 5, 6, 7). Threads take
/// them round-robin: thread i the (i mod n)-th.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl CpuList {
    /// The CPU of thread `i`: the (i mod n)-th; `None` for an empty list.
    pub fn of(&self, i: usize) -> Option<usize> {
        self.0.get(i % self.0.len().max(1)).copied()
    }
}

impl FromStr for CpuList {
    type Err = CpuListError;

    /// Parses `0,2,5-7`: comma-separated CPUs and increasing ranges, at least one.
    fn from_str(s: &str) -> Result<Self, CpuListError> {
        let mut v = Vec::new();
        for item in s.split(',').map(str::trim) {
            let num = |t: &str| {
                t.trim()
                    .parse::<usize>()
                    .map_err(|_| CpuListError::NotANumber {
                        cpu: t.to_owned(),
                        list: s.to_owned(),
                    })
            };
            match item.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(CpuListError::Decreasing(item.to_owned()));
                    }
                    v.extend(a..=b);
                }
                None => v.push(num(item)?),
            }
        }
        Ok(CpuList(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<CpuList, CpuListError> {
        s.parse()
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse("0").unwrap().0, [0]);
        assert_eq!(parse("0,2,5-7").unwrap().0, [0, 2, 5, 6, 7]);
        assert!(parse("3-1").unwrap_err().to_string().contains("decreasing"));
        assert!(parse("a").unwrap_err().to_string().contains("'a'"));
        assert!(parse("").is_err());
        assert!(parse("1,,2").is_err());
    }

    #[test]
    fn threads_take_them_round_robin() {
        let l = parse("4,6").unwrap();
        assert_eq!([l.of(0), l.of(1), l.of(2)], [Some(4), Some(6), Some(4)]);
        assert_eq!(CpuList(vec![]).of(3), None);
    }
}
