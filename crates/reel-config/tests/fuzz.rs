//! Property tests: the config loader never panics, whatever the bytes, and every problem it
//! reports points into the file (1-based line and column within it) with a message.

use proptest::prelude::*;
use reel_config::Config;

const SHIPPED: &[&str] =
    &[include_str!("../../../config/reel.toml"), include_str!("../../../config/production.toml")];

/// Checks one text: no panic; on error every problem is positioned inside the text.
fn check(text: &str) -> Result<(), TestCaseError> {
    let lines: Vec<&str> = text.split('\n').collect();
    if let Err(e) = Config::parse_and_validate(text, "fuzz.toml") {
        prop_assert!(!e.problems.is_empty());
        for p in &e.problems {
            prop_assert_eq!(&p.file, "fuzz.toml");
            prop_assert!(!p.message.is_empty(), "{}", p);
            prop_assert!(
                p.line >= 1 && p.line <= lines.len().max(1),
                "{} outside {} lines",
                p,
                lines.len()
            );
            let width = lines.get(p.line - 1).map_or(0, |l| l.chars().count());
            prop_assert!(
                p.column >= 1 && p.column <= width + 1,
                "{} beyond column {}",
                p,
                width + 1
            );
        }
    }
    Ok(())
}

/// A mutation of a shipped config: a changed byte, a deleted or duplicated line, a value
/// swapped for another type.
#[derive(Debug, Clone)]
enum Edit {
    Byte(usize, u8),
    DeleteLine(usize),
    DuplicateLine(usize),
    Value(usize, &'static str),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (
            any::<usize>(),
            prop_oneof![Just(b'"'), Just(b'='), Just(b'['), Just(b'\n'), Just(b'9'), any::<u8>()]
        )
            .prop_map(|(i, b)| Edit::Byte(i, b)),
        any::<usize>().prop_map(Edit::DeleteLine),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (
            any::<usize>(),
            prop_oneof![
                Just("\"\""),
                Just("-1"),
                Just("99999999999999999999999"),
                Just("true"),
                Just("\"1x\""),
                Just("[]"),
                Just("{}"),
                Just("\"0.0.0.0:0\""),
                Just("\"é\""),
                Just("\"300ms\""),
                Just("1.5"),
                Just("\"-5s\""),
                Just("\"1TiB\""),
            ]
        )
            .prop_map(|(i, v)| Edit::Value(i, v)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for e in edits {
        match *e {
            Edit::Byte(i, b) => {
                if !bytes.is_empty() {
                    let i = i % bytes.len();
                    bytes[i] = b;
                }
            }
            Edit::DeleteLine(i) | Edit::DuplicateLine(i) | Edit::Value(i, _) => {
                let s = String::from_utf8_lossy(&bytes).into_owned();
                let mut lines: Vec<String> = s.split('\n').map(str::to_string).collect();
                let i = i % lines.len();
                match *e {
                    Edit::DeleteLine(_) => {
                        lines.remove(i);
                    }
                    Edit::DuplicateLine(_) => {
                        let l = lines[i].clone();
                        lines.insert(i, l);
                    }
                    Edit::Value(_, v) => {
                        if let Some(eq) = lines[i].find(" = ") {
                            lines[i] = format!("{} = {v}", &lines[i][..eq]);
                        }
                    }
                    Edit::Byte(..) => {}
                }
                bytes = lines.join("\n").into_bytes();
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_loader_never_panics_on_arbitrary_text(text in "(?s).{0,400}") {
        check(&text)?;
    }

    #[test]
    fn mutated_shipped_configs_are_accepted_or_refused_with_positions(
        which in 0usize..2,
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        check(&apply(SHIPPED[which], &edits))?;
    }
}
