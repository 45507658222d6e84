//! dummynet-style command lines: `test -alg wf2qp -n 10M -qmin 4n -qmax 30n -flowsets ...`.
//!
//! dummynet's `test` takes long options with one dash. clap would read `-alg` as the short
//! flags `-a -l -g`, so before parsing, every argument that is exactly one dash followed by
//! one of our long option names (or `-name=value`) is rewritten with two dashes. `-n` and
//! `-d` are short options already. Values are never rewritten: an argument is only
//! rewritten when it is not the value of the option before it, nor after `--`.

/// Long options that dummynet spells with one dash (and ours that take a value).
const LONG: &[(&str, bool)] = &[
    ("alg", true),
    ("qmin", true),
    ("qmax", true),
    ("flowsets", true),
    ("flows", true),
    ("len", true),
    ("burst", true),
    ("loops", true),
    ("pattern", true),
    ("seed", true),
    ("params", true),
    ("capacity", true),
    ("packets", true),
    ("txq", true),
    ("rate", true),
    ("fill-rate", true),
    ("switch-on-empty", true),
    ("json", false),
    ("help", false),
    ("version", false),
];

/// Short options that take a value (their next argument is a value, never rewritten).
const SHORT_WITH_VALUE: &[&str] = &["-n", "-d"];

/// Rewrites dummynet's single-dash long options to GNU style.
pub fn gnu_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut value_next = false;
    let mut positional = false;
    for (i, arg) in args.into_iter().enumerate() {
        if i == 0 || value_next || positional || arg == "--" {
            positional |= arg == "--";
            value_next = false;
            out.push(arg);
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, _)) => (n, true),
            None => (arg.as_str(), false),
        };
        let long = name
            .strip_prefix("--")
            .or_else(|| name.strip_prefix('-'))
            .and_then(|n| LONG.iter().find(|(l, _)| *l == n));
        match long {
            Some(&(_, takes_value)) => {
                value_next = takes_value && !inline;
                if arg.starts_with("--") {
                    out.push(arg);
                } else {
                    out.push(format!("-{arg}"));
                }
            }
            None => {
                value_next = SHORT_WITH_VALUE.contains(&arg.as_str());
                out.push(arg);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gnu(line: &str) -> String {
        gnu_args(line.split(' ').map(String::from)).join(" ")
    }

    #[test]
    fn dummynet_options_get_two_dashes() {
        assert_eq!(
            gnu("pspat bench sched -alg wf2qp -n 10M -qmin 4n -qmax 30n -flowsets 1::1024"),
            "pspat bench sched --alg wf2qp -n 10M --qmin 4n --qmax 30n --flowsets 1::1024"
        );
        assert_eq!(
            gnu("pspat bench sched -len=1500 -burst 4 -d 3 -json"),
            "pspat bench sched --len=1500 --burst 4 -d 3 --json"
        );
    }

    #[test]
    fn gnu_options_and_values_are_left_alone() {
        let line = "pspat bench sched --alg fifo --flows 8 -n 100 --json";
        assert_eq!(gnu(line), line);
        // a value that looks like an option is still a value
        assert_eq!(gnu("pspat x --params -alg"), "pspat x --params -alg");
        assert_eq!(gnu("pspat x -n -len"), "pspat x -n -len");
        // unknown single-dash words are clap's to judge
        assert_eq!(gnu("pspat x -bogus"), "pspat x -bogus");
        assert_eq!(gnu("pspat x -- -alg"), "pspat x -- -alg");
    }
}
