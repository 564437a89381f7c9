//! `[access_log]`: fields, sampling and sinks, each problem reported at its key.

use super::*;

const LISTENER: &str = "[[listener]]\nname = \"http\"\naddress = \"127.0.0.1:0\"\n";

#[test]
fn sinks_fields_and_fractions_are_checked_at_their_keys() {
    let text = format!(
        "{LISTENER}[access_log]\nformat = \"combined\"\nfields = [\"time\", \"time\"]\n\
         [access_log.sample]\n\"2xx\" = 1.5\n\
         [[access_log.sink]]\nurl = \"http://c/\"\n\
         [[access_log.sink]]\nkind = \"syslog\"\naddress = \"udp://h\"\nfacility = \"local9\"\napp_name = \"a b\"\n\
         [[access_log.sink]]\nkind = \"http\"\nurl = \"https://c/\"\nbatch_lines = 0\n\
         [[access_log.sink]]\nkind = \"file\"\n\
         [[access_log.sink]]\nkind = \"syslog\"\nname = \"syslog\"\naddress = \"unix:/dev/log\"\npath = \"x\"\n"
    );
    let ps = problems(&text);
    let msg = |key: &str| find(&ps, key).message.clone();
    assert!(msg("access_log.fields[1]").contains("\"time\" is listed twice"));
    assert_eq!(find(&ps, "access_log.fields[1]").line, 6);
    assert!(msg("access_log.sample.2xx").contains("not a fraction"));
    assert!(msg("access_log.sink[0]").contains("needs kind"));
    assert!(msg("access_log.sink[1].address").contains("has no :port"));
    assert!(msg("access_log.sink[1].facility").contains("unknown facility \"local9\""));
    assert!(msg("access_log.sink[1].app_name").contains("RFC 5424"));
    assert!(msg("access_log.sink[2].url").contains("https is not supported"));
    assert!(msg("access_log.sink[2].kind").contains("format = \"json\""));
    assert!(msg("access_log.sink[2].batch_lines").contains("at least 1"));
    assert!(msg("access_log.sink[3].path").contains("needs a path"));
    assert!(msg("access_log.sink[3].name").contains("\"file\" is taken"));
    assert!(msg("access_log.sink[4].path").contains("applies to kind = \"file\""));
    assert!(msg("access_log.sink[4].name").contains("\"syslog\" is taken"));
}

#[test]
fn a_config_without_the_new_keys_logs_every_field_of_every_request_to_its_file() {
    let c = Config::parse_and_validate(LISTENER, "t.toml").expect("valid");
    let a = &c.access_log;
    assert_eq!(a.fields, ACCESS_LOG_FIELDS);
    assert!(a.sample.classes().iter().all(|(_, r)| *r == 1.0));
    assert!(a.sink.is_empty());
    let only_sinks = format!(
        "{LISTENER}[access_log]\npath = \"\"\n[[access_log.sink]]\nkind = \"syslog\"\naddress = \"tcp://[::1]:601\"\n"
    );
    assert!(problems(&only_sinks).is_empty(), "{:#?}", problems(&only_sinks));
    assert!(!problems(&format!("{LISTENER}[access_log]\npath = \"\"\n")).is_empty());
}
