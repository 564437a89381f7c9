//! `[site.cors]` and `[[site.header]]`: defaults, and the problems `reel check` reports.

use super::*;

/// `[site.cors]` and `[[site.header]]`: what a browser would never send or a rule must not
/// touch is refused at `reel check`, each at its own line.
#[test]
fn cors_and_header_rules_are_checked() {
    let site = |more: &str| {
        BASE.replace("origin_group = \"main\"\n", &format!("origin_group = \"main\"\n{more}\n"))
    };
    let ok = site(
        "[site.cors]\nallow_origins = [\"https://player.example.com\", \"https://*.example.net\"]\n\
         max_age = \"10m\"\n\n[[site.header]]\naction = \"set\"\nname = \"Cache-Control\"\n\
         value = \"max-age=1\"\npath = \"*.m3u8\"\n\n[[site.header]]\naction = \"remove\"\n\
         name = \"Cache-Status\"\n",
    );
    let cfg = Config::parse_and_validate(&ok, "t.toml").expect("valid");
    let cors = cfg.site[0].cors.as_ref().expect("cors");
    assert!(cors.expose_headers.iter().any(|h| h == "Cache-Status"), "the default exposes it");
    assert!(cors.allow_headers.iter().any(|h| h == "CMCD-Request"), "the default allows CMCD");
    assert_eq!(cfg.site[0].header.len(), 2);
    let any = site("[site.cors]\nallow_origins = \"*\"\n");
    assert!(problems(&any).is_empty(), "{:#?}", problems(&any));

    let text = site(
        "[site.cors]\nallow_origins = [\"https://player.example.com/\", \"HTTPS://x.example\", \
         \"https://x.example:443\"]\nallow_headers = [\"bad header\"]\nmax_age = \"48h\"\n\n\
         [[site.header]]\naction = \"set\"\nname = \"Content-Length\"\nvalue = \"1\"\n\n\
         [[site.header]]\naction = \"add\"\nname = \"Access-Control-Allow-Origin\"\nvalue = \"*\"\n\n\
         [[site.header]]\naction = \"remove\"\nname = \"X-A\"\nvalue = \"1\"\nstatus = [99]\n\n\
         [[site.header]]\naction = \"set\"\nname = \"Proxy-Authenticate\"\n\n\
         [[site.header]]\naction = \"set\"\nname = \"Cache-Status\"\nvalue = \"x\"\npath = \"live/*\"\n",
    );
    let ps = problems(&text);
    for (key, says) in [
        ("site[0].cors.allow_origins[0]", "no path"),
        ("site[0].cors.allow_origins[1]", "lowercase"),
        ("site[0].cors.allow_origins[2]", "default port"),
        ("site[0].cors.allow_headers[0]", "not a field name"),
        ("site[0].cors.max_age", "at most 24h"),
        ("site[0].header[0].name", "frames the body"),
        ("site[0].header[1].name", "[site.cors] writes"),
        ("site[0].header[2].value", "remove takes no value"),
        ("site[0].header[2].status[0]", "200-599"),
        ("site[0].header[3].name", "Proxy-*"),
        ("site[0].header[3].value", "need a value"),
        ("site[0].header[4].name", "only be removed"),
        ("site[0].header[4].path", "can never match"),
    ] {
        let p = find(&ps, key);
        assert!(p.message.contains(says), "{key}: {p}");
        assert!(p.line > 0, "{key} has no line: {p}");
    }
    assert_eq!(
        find(&ps, "site[0].header[0].name").line,
        line_of(&text, "name = \"Content-Length\"")
    );

    let star_credentials = site("[site.cors]\nallow_origins = \"*\"\nallow_credentials = true\n");
    let p = find(&problems(&star_credentials), "site[0].cors.allow_credentials").clone();
    assert!(p.message.contains("list the origins"), "{p}");
    let one_string = site("[site.cors]\nallow_origins = \"https://p.example\"\n");
    let p = find(&problems(&one_string), "site[0].cors.allow_origins").clone();
    assert!(p.message.contains("must be \"*\""), "{p}");
}
