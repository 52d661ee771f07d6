//! The web console (`/ui/` on the admin listener) in a real headless
//! Chromium, against three real nodes in three zones: log in with the
//! admin token, see the nodes by zone, stage, preview and apply a layout
//! change, create a bucket and a key, allow the key on the bucket (then
//! aws-cli writes with that key), upload 20 MiB through the page with its
//! progress bar, download it, delete objects and the bucket, on a desktop and a
//! phone-sized viewport; every page is screenshotted and checked to be
//! non-blank. Screenshots go to `target/tmp/console-screenshots/`.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::browser::{non_background_share, Browser};
use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::{aws, endpoint};
use serde_json::Value;

const TOKEN: &str = "console-test-token-5b1e";
const PAGE: Duration = Duration::from_secs(60);

fn shots() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots")
}

/// Takes a screenshot named `name` (with `element` scrolled to the top,
/// if given) and checks that it shows something.
fn shot_at(b: &mut Browser, name: &str, element: &str) {
    b.eval(&format!(
        "document.querySelector({}).scrollIntoView()",
        js(element)
    ));
    shot(b, name);
}

/// Takes a screenshot named `name` and checks that it shows something
/// (and no value the page failed to render as text), and that every
/// control has a name a screen reader can say.
fn shot(b: &mut Browser, name: &str) {
    let text = b.eval("document.body.innerText");
    assert!(
        !text.as_str().unwrap_or("").contains("[object "),
        "{name}: the page shows an unrendered value:\n{text}"
    );
    let unnamed = b.eval(
        "[...document.querySelectorAll('button, input, select')].filter(e => !e.closest('[hidden]') && \
         !(e.closest('label') || (e.tagName === 'BUTTON' && (e.textContent.trim() || e.getAttribute('aria-label'))) \
           || e.getAttribute('aria-label'))).map(e => e.outerHTML)",
    );
    assert_eq!(
        unnamed,
        serde_json::json!([]),
        "{name}: controls without a name"
    );
    let png = b.screenshot(&shots().join(format!("{name}.png")));
    let share = non_background_share(&png);
    assert!(share > 0.02, "{name}: the screenshot is blank ({share})");
}

/// Gives node 0 an admin listener with [`TOKEN`] (before it starts);
/// returns its base URL.
fn enable_admin(c: &Cluster) -> String {
    let n0 = &c.nodes[0];
    let mut conf = std::fs::read_to_string(&n0.config).unwrap();
    conf.push_str(&format!(
        "\n[admin]\napi_bind_addr = \"{}:3903\"\nadmin_token = \"{TOKEN}\"\n",
        n0.ip
    ));
    std::fs::write(&n0.config, conf).unwrap();
    format!("http://{}:3903", n0.ip)
}

/// The admin API, read with curl and the token.
fn admin_get(base: &str, endpoint: &str) -> Value {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "-H"])
        .arg(format!("Authorization: Bearer {TOKEN}"))
        .arg(format!("{base}/v2/{endpoint}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A JavaScript string literal.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Sets a form field's value as typing would, and says so to the page.
fn fill(b: &mut Browser, selector: &str, value: &str) {
    b.eval(&format!(
        "(() => {{ const e = document.querySelector({}); e.value = {}; \
         e.dispatchEvent(new Event('input', {{bubbles: true}})); \
         e.dispatchEvent(new Event('change', {{bubbles: true}})); }})()",
        js(selector),
        js(value)
    ));
}

/// Opens the console page `hash` and waits until `ready` (a script
/// expression) holds.
fn open(b: &mut Browser, hash: &str, what: &str, ready: &str) {
    b.eval(&format!("location.hash = {}", js(hash)));
    b.wait_for(what, ready, PAGE);
}

fn click(b: &mut Browser, selector: &str) {
    b.eval(&format!("document.querySelector({}).click()", js(selector)));
}

fn text_of(b: &mut Browser, selector: &str) -> String {
    b.eval(&format!(
        "(document.querySelector({}) || {{}}).textContent || ''",
        js(selector)
    ))
    .as_str()
    .unwrap_or("")
    .to_string()
}

#[test]
fn console_in_a_browser_against_three_zones() {
    let mut c = Cluster::new(3, 3);
    let base = enable_admin(&c);
    c.start_all();
    wait_until("three nodes up", CLUSTER_DEADLINE, || {
        let s = admin_get(&base, "GetClusterStatus");
        s["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().filter(|n| n["isUp"] == true).count() == 3)
    });
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
    let node2 = c.nodes[2].id().to_string();

    let mut b = Browser::start(1280, 800);
    b.goto(&format!("{base}/ui/"));
    b.wait_for("the login form", "document.getElementById('token')", PAGE);
    assert!(
        b.eval("[...document.querySelectorAll('input, select')].every(e => e.closest('label'))")
            == Value::Bool(true),
        "every field has a label"
    );
    shot(&mut b, "login");

    // A wrong token is refused, with the API's message.
    fill(&mut b, "#token", "not-the-token");
    click(&mut b, "#login");
    b.wait_for("the refusal", "document.querySelector('.msg.error')", PAGE);
    assert!(b.eval("document.getElementById('top').hidden") == Value::Bool(true));

    fill(&mut b, "#token", TOKEN);
    click(&mut b, "#login");
    b.wait_for(
        "the nodes by zone",
        "document.querySelectorAll('section.zone').length === 3",
        PAGE,
    );
    for z in ["dc1", "dc2", "dc3"] {
        let cell = text_of(&mut b, &format!("section.zone[data-zone={z}] tbody"));
        assert!(cell.contains("up"), "zone {z}: {cell}");
    }
    b.wait_for(
        "the health line",
        "document.getElementById('health').textContent.includes('healthy')",
        PAGE,
    );
    assert!(
        b.eval("document.cookie === '' && localStorage.length === 0 && sessionStorage.length === 0 && !location.href.includes('console-test')")
            == Value::Bool(true),
        "the token is nowhere but in memory"
    );
    shot(&mut b, "cluster");
    // The layout's storage classes, with their zones and what they survive,
    // and what the nodes store of each and have left to move.
    let classes = text_of(&mut b, "#layout");
    assert!(
        classes.contains("replication 3")
            && classes.contains("erasure 2+1")
            && classes.contains("any 1 node(s) or a zone")
            && classes.contains("Stored")
            && classes.contains("Moving"),
        "{classes}"
    );

    // Stage a change (node 2 to 2 GB), preview it, apply it.
    b.eval(&format!(
        "document.getElementById('stage-node').value = {}",
        js(&node2)
    ));
    fill(&mut b, "#stage-zone", "dc3");
    fill(&mut b, "#stage-capacity", "2G");
    click(&mut b, "#stage");
    b.wait_for(
        "the staged change",
        "document.getElementById('preview-button')",
        PAGE,
    );
    click(&mut b, "#preview-button");
    b.wait_for(
        "the preview",
        "document.querySelector('#preview pre')",
        PAGE,
    );
    let preview = text_of(&mut b, "#preview");
    assert!(preview.contains("version 2"), "{preview}");
    shot_at(&mut b, "layout-preview", "#layout");
    click(&mut b, "#apply");
    b.wait_for(
        "the layout applied",
        "document.getElementById('layout-msg').textContent.includes('applied')",
        PAGE,
    );
    let layout = admin_get(&base, "GetClusterLayout");
    assert_eq!(layout["version"], 2, "{layout}");
    // The transition, then its end, and each node's block queues.
    b.wait_for(
        "the transition to version 2 to end",
        "(() => { const t = document.querySelector('#transition p'); \
         if (t && t.textContent.includes('every node has synced version 2')) { \
           clearTimeout(window.__reload); window.__reload = null; return true; } \
         if (!window.__reload) { window.__reload = setTimeout(() => { window.__reload = null; \
         window.dispatchEvent(new HashChangeEvent('hashchange')); }, 1000); } return false; })()",
        CLUSTER_DEADLINE,
    );
    assert_eq!(
        b.eval("document.querySelectorAll('#blocks tbody tr').length"),
        Value::from(3),
        "one row of block queues per node"
    );
    let role = layout["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == node2.as_str())
        .unwrap();
    assert_eq!(role["capacity"], 2_000_000_000u64, "{layout}");

    // A bucket.
    open(
        &mut b,
        "#/buckets",
        "the buckets page",
        "document.getElementById('create-bucket')",
    );
    fill(&mut b, "#bucket-name", "from-the-console");
    click(&mut b, "#create-bucket button[type=submit]");
    b.wait_for(
        "the new bucket's page",
        "document.querySelector('h1').textContent === 'Bucket from-the-console'",
        PAGE,
    );
    let bucket_url = b.eval("location.hash").as_str().unwrap().to_string();

    // A key: its secret is shown once. The keys page is reached with the
    // keyboard alone: Tab from the skip link to the Keys link, then Enter.
    b.eval("document.querySelector('.skip').focus()");
    for _ in 0..10 {
        if b.eval("document.activeElement.id") == "nav-keys" {
            break;
        }
        b.press("Tab");
    }
    assert_eq!(b.eval("document.activeElement.id"), "nav-keys");
    b.press("Enter");
    b.wait_for(
        "the keys page",
        "document.getElementById('create-key')",
        PAGE,
    );
    fill(&mut b, "#key-name", "console-key");
    click(&mut b, "#create-key button[type=submit]");
    b.wait_for(
        "the new secret",
        "document.getElementById('new-key-secret')",
        PAGE,
    );
    let key_id = text_of(&mut b, "#new-key-id");
    let secret = text_of(&mut b, "#new-key-secret");
    assert!(
        key_id.starts_with("GK") && secret.len() == 64,
        "{key_id} {secret}"
    );
    shot(&mut b, "keys");

    // Allowed on the bucket from its page, the key writes with aws-cli.
    open(
        &mut b,
        &bucket_url,
        "the bucket's page",
        "document.getElementById('allow-key')",
    );
    b.eval(&format!(
        "document.querySelector('#allow-key select').value = {}",
        js(&key_id)
    ));
    click(&mut b, "#allow-key button[type=submit]");
    b.wait_for(
        "the key listed on the bucket",
        &format!(
            "document.querySelector('table').textContent.includes({})",
            js(&key_id)
        ),
        PAGE,
    );
    // A second name, added then removed; quotas; all through the API.
    let info = || admin_get(&base, "GetBucketInfo?globalAlias=from-the-console");
    fill(&mut b, "#alias-name", "second-name");
    click(&mut b, "#add-alias button[type=submit]");
    b.wait_for(
        "the new name",
        "document.querySelector(\"button[data-alias='second-name']\")",
        PAGE,
    );
    assert!(info()["globalAliases"].to_string().contains("second-name"));
    fill(&mut b, "#quota-size", "1G");
    fill(&mut b, "#quota-objects", "5");
    click(&mut b, "#quotas button[type=submit]");
    wait_until("the quotas are set", CLUSTER_DEADLINE, || {
        info()["quotas"] == serde_json::json!({"maxSize": 1_000_000_000u64, "maxObjects": 5})
    });
    b.wait_for(
        "the page shows the quotas",
        "(document.querySelector(\"dd[data-fact='Quota: objects']\") || {}).textContent === '5'",
        PAGE,
    );
    shot(&mut b, "bucket");
    click(&mut b, "button[data-alias='second-name']");
    b.wait_for(
        "the name removed",
        "!document.querySelector(\"button[data-alias='second-name']\")",
        PAGE,
    );
    assert!(!info()["globalAliases"].to_string().contains("second-name"));

    // The key's own page: it may now create buckets.
    b.eval(&format!(
        "location.hash = {}",
        js(&format!("#/key/{key_id}"))
    ));
    b.wait_for(
        "the key's page",
        "document.getElementById('create-bucket-permission')",
        PAGE,
    );
    assert_eq!(text_of(&mut b, "#may-create"), "no");
    click(&mut b, "#create-bucket-permission");
    b.wait_for(
        "the permission",
        "document.getElementById('may-create') && document.getElementById('may-create').textContent === 'yes'",
        PAGE,
    );
    let k = admin_get(&base, &format!("GetKeyInfo?id={key_id}"));
    assert_eq!(k["permissions"]["createBucket"], true, "{k}");
    assert!(k["buckets"].to_string().contains("from-the-console"), "{k}");
    open(
        &mut b,
        &bucket_url,
        "the bucket's page",
        "document.getElementById('allow-key')",
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"written with the console's key").unwrap();
    let creds = (key_id.clone(), secret.clone());
    let ep = endpoint(&c, 0);
    let o = aws(
        &creds,
        &ep,
        dir.path(),
        &["s3", "cp", "f", "s3://from-the-console/f"],
    );
    assert!(o.status.success(), "{o:?}");

    let settings_url = s3_settings(&mut b, &base, &c, &creds);
    open(
        &mut b,
        &bucket_url,
        "the bucket's page",
        "document.getElementById('delete-bucket')",
    );

    // A non-empty bucket is not deleted: the API's message is shown.
    b.eval("window.confirm = () => true");
    click(&mut b, "#delete-bucket");
    b.wait_for("the refusal", "document.querySelector('.msg.error')", PAGE);

    // Objects: the one aws-cli wrote is listed; 20 MiB go up through the
    // page (a multipart upload, with its progress bar) and come back down.
    click(&mut b, "#browse");
    b.wait_for(
        "the object list",
        "[...document.querySelectorAll('.object-name')].some(e => e.textContent === 'f')",
        PAGE,
    );
    let mut x = 0x9e37_79b9u32;
    let big: Vec<u8> = (0..20u32 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let up = tempfile::tempdir().unwrap();
    let big_path = up.path().join("big.bin");
    std::fs::write(&big_path, &big).unwrap();
    b.set_file("#upload-file", &big_path);
    click(&mut b, "#upload");
    b.wait_for(
        "the upload",
        "document.querySelector('.msg.ok') && document.querySelector('.msg.ok').textContent.startsWith('Uploaded big.bin')",
        PAGE,
    );
    assert!(
        b.eval("(() => { const p = document.getElementById('upload-progress'); return p.value === p.max && p.max === 20971520; })()")
            == Value::Bool(true),
        "the progress bar is full"
    );
    shot(&mut b, "objects");
    let o = aws(
        &creds,
        &ep,
        dir.path(),
        &["s3", "cp", "s3://from-the-console/big.bin", "big-back"],
    );
    assert!(o.status.success(), "{o:?}");
    assert!(
        std::fs::read(dir.path().join("big-back")).unwrap() == big,
        "aws-cli reads back what the page uploaded"
    );

    let downloads = tempfile::tempdir().unwrap();
    b.allow_downloads(downloads.path());
    click(&mut b, "button[data-key='big.bin']");
    let got = downloads.path().join("big.bin");
    wait_until("the browser downloads big.bin", CLUSTER_DEADLINE, || {
        std::fs::metadata(&got).is_ok_and(|m| m.len() == big.len() as u64)
    });
    assert!(
        std::fs::read(&got).unwrap() == big,
        "the download is byte for byte the upload"
    );

    b.eval("window.confirm = () => true");
    for k in ["f", "big.bin"] {
        click(&mut b, &format!("button[data-delete='{k}']"));
        b.wait_for(
            "the deletion",
            &format!("document.querySelector('.msg.ok') && document.querySelector('.msg.ok').textContent === 'Deleted {k}.'"),
            PAGE,
        );
    }
    let o = aws(
        &creds,
        &ep,
        dir.path(),
        &["s3", "ls", "s3://from-the-console/"],
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).trim().is_empty(),
        "{o:?}"
    );

    // Now empty, the bucket is deleted from its page.
    open(
        &mut b,
        &bucket_url,
        "the bucket's page",
        "document.getElementById('delete-bucket')",
    );
    b.eval("window.confirm = () => true");
    click(&mut b, "#delete-bucket");
    b.wait_for("the bucket list", "location.hash === '#/buckets'", PAGE);
    wait_until("the bucket is gone", CLUSTER_DEADLINE, || {
        !admin_get(&base, "ListBuckets")
            .to_string()
            .contains("from-the-console")
    });

    // Activity: the RTT between every two nodes, and charts of each node's
    // own counters (sampled every 10 s: the page follows them).
    b.eval("location.hash = '#/activity'");
    b.wait_for(
        "the RTT of every pair and three charts per node",
        "document.querySelectorAll('section.node-charts canvas').length === 9 && \
         [...document.querySelectorAll('tbody tr')].every(r => [...r.children].slice(1).every(td => td.textContent === '—' || /^[0-9.]+$/.test(td.textContent)))",
        Duration::from_secs(90),
    );
    let label = b.eval(&format!(
        "document.querySelector('section.node-charts[data-node={}] canvas').getAttribute('aria-label')",
        js(c.nodes[0].id())
    ));
    let label = label.as_str().unwrap();
    assert!(
        label.starts_with("Requests and errors. requests: now")
            && !label.contains("requests: now 0.00/s, peak 0.00/s"),
        "node 0 served requests: {label}"
    );
    // The 20 MiB went up through node 0's S3 endpoint (the relay): its
    // traffic chart shows bytes in.
    b.wait_for(
        "node 0's traffic chart to show the upload",
        &format!(
            "(document.getElementById({}) || {{getAttribute: () => ''}}).getAttribute('aria-label').startsWith('S3 and website bytes in and out. in: now') && \
             !(document.getElementById({}) || {{getAttribute: () => ''}}).getAttribute('aria-label').includes('peak 0 B/s;')",
            js(&format!("traffic-{}", &c.nodes[0].id()[..8])),
            js(&format!("traffic-{}", &c.nodes[0].id()[..8])),
        ),
        Duration::from_secs(90),
    );
    shot(&mut b, "activity");

    // A phone: the cluster page fits its width.
    b.viewport(390, 844, true);
    open(
        &mut b,
        "#/cluster",
        "the nodes by zone",
        "document.querySelectorAll('section.zone').length === 3",
    );
    assert!(
        b.eval("document.documentElement.scrollWidth <= window.innerWidth + 1")
            == Value::Bool(true),
        "no horizontal scrolling on a phone"
    );
    shot(&mut b, "cluster-phone");
    // And so does a bucket's page with its settings forms.
    open(
        &mut b,
        &settings_url,
        "the bucket's settings",
        "document.getElementById('lifecycle-form')",
    );
    assert!(
        b.eval("document.documentElement.scrollWidth <= window.innerWidth + 1")
            == Value::Bool(true),
        "no horizontal scrolling on a phone (bucket page)"
    );
    shot_at(&mut b, "bucket-settings-phone", "#s3-settings");

    // Logging out forgets the token.
    click(&mut b, "#logout");
    b.wait_for("the login form", "document.getElementById('token')", PAGE);
    open(
        &mut b,
        "#/keys",
        "the login form",
        "document.getElementById('token')",
    );
}

/// One request with curl: (status, body).
fn curl(args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap(), body.to_string())
}

/// A POST to the admin API with the token: (status, answer).
fn admin_post(base: &str, endpoint: &str, body: &str) -> (u16, String) {
    curl(&[
        "-X",
        "POST",
        "-H",
        &format!("Authorization: Bearer {TOKEN}"),
        "--data-binary",
        body,
        &format!("{base}/v2/{endpoint}"),
    ])
}

/// PresignS3Request without a browser: a presigned GET works on the S3
/// endpoint itself and through the relay; bad requests get the API's
/// errors; the relay passes presigned requests only, and S3 still checks
/// the key's permissions (a key not allowed on the bucket is refused).
#[test]
fn presigned_requests_and_the_relay() {
    use common::s3::{aws_ok, make_key};
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "presign");
    let other = make_key(&c, "other");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"presigned bytes").unwrap();
    aws_ok(&key, &ep, dir.path(), &["s3", "mb", "s3://signed"]);
    aws_ok(
        &key,
        &ep,
        dir.path(),
        &["s3", "cp", "f", "s3://signed/a b/f"],
    );
    let presign =
        |body: serde_json::Value| admin_post(&base, "PresignS3Request", &body.to_string());
    let (status, text) = presign(serde_json::json!({
        "accessKeyId": key.0, "method": "GET", "bucket": "signed", "key": "a b/f"
    }));
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let pq = v["pathAndQuery"].as_str().unwrap();
    assert!(
        pq.starts_with("/signed/a%20b/f?") && pq.contains("X-Amz-Signature="),
        "{pq}"
    );
    let direct = format!("http://{}{pq}", v["host"].as_str().unwrap());
    assert_eq!(curl(&[&direct]), (200, "presigned bytes".into()));
    assert_eq!(
        curl(&[&format!("{base}/ui/s3{pq}")]),
        (200, "presigned bytes".into())
    );
    // A tampered signature is refused by S3.
    let at = pq.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
    let flipped = if &pq[at..at + 1] == "0" { "1" } else { "0" };
    let bad = format!("{base}/ui/s3{}{flipped}{}", &pq[..at], &pq[at + 1..]);
    assert_eq!(curl(&[&bad]).0, 403);
    // No signature: the relay refuses.
    let (status, text) = curl(&[&format!("{base}/ui/s3/signed/a%20b/f")]);
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("presigned requests only"), "{text}");
    // A key without permission on the bucket: S3 refuses it.
    let (_, text) = presign(serde_json::json!({
        "accessKeyId": other.0, "method": "GET", "bucket": "signed", "key": "a b/f"
    }));
    let v: Value = serde_json::from_str(&text).unwrap();
    let pq = v["pathAndQuery"].as_str().unwrap();
    assert_eq!(curl(&[&format!("{base}/ui/s3{pq}")]).0, 403);
    // Bad requests.
    for (body, status, words) in [
        (
            serde_json::json!({"accessKeyId": key.0, "method": "PATCH", "bucket": "signed"}),
            400,
            "PATCH",
        ),
        (
            serde_json::json!({"accessKeyId": key.0, "method": "GET", "bucket": "signed", "expiresSecs": 0}),
            400,
            "expiresSecs",
        ),
        (
            serde_json::json!({"accessKeyId": "GKnope", "method": "GET", "bucket": "signed"}),
            404,
            "GKnope",
        ),
    ] {
        let (s, text) = presign(body);
        assert_eq!(s, status, "{text}");
        assert!(text.contains(words), "{text}");
    }
}

/// The S3 settings of a bucket the console's key made (so owns), changed
/// from its page: versioning, a CORS rule, a lifecycle rule; each change
/// read back with aws-cli, and a rule with no action refused.
/// Returns the bucket page's hash.
fn s3_settings(b: &mut Browser, base: &str, c: &Cluster, creds: &(String, String)) -> String {
    let ep = endpoint(c, 0);
    let dir = tempfile::tempdir().unwrap();
    let s3api = |args: &[&str]| {
        let mut all = vec!["s3api"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--bucket", "console-settings"]);
        aws(creds, &ep, dir.path(), &all)
    };
    // Reads a setting back with aws-cli: it must succeed and say each of `wants`.
    let s3api_says = |args: &[&str], wants: &[&str]| {
        let o = s3api(args);
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        for want in wants {
            assert!(
                o.status.success() && out.contains(want),
                "{want} in {args:?}: {o:?}"
            );
        }
    };
    let o = aws(
        creds,
        &ep,
        dir.path(),
        &["s3", "mb", "s3://console-settings"],
    );
    assert!(o.status.success(), "{o:?}");
    let info = || admin_get(base, "GetBucketInfo?globalAlias=console-settings");
    let id = info()["id"].as_str().unwrap().to_string();
    open(
        b,
        &format!("#/bucket/{id}"),
        "the S3 settings",
        "document.getElementById('versioning-toggle')",
    );
    assert_eq!(text_of(b, "#versioning-state"), "off");

    click(b, "#versioning-toggle");
    b.wait_for(
        "versioning enabled",
        "(document.getElementById('versioning-state') || {}).textContent === 'enabled'",
        PAGE,
    );
    s3api_says(&["get-bucket-versioning"], &["Enabled"]);

    fill(b, "#cors-origins", "https://app.example.com");
    fill(b, "#cors-max-age", "600");
    b.eval("document.querySelector(\"#cors-form input[value='PUT']\").checked = true");
    click(b, "#cors-form button[type=submit]");
    b.wait_for(
        "the CORS rule",
        "document.querySelector(\"button[data-cors-remove='0']\")",
        PAGE,
    );
    s3api_says(
        &["get-bucket-cors"],
        &["https://app.example.com", "\"PUT\"", "\"HEAD\"", "600"],
    );

    // A lifecycle rule needs an action: the page says so, S3 is not asked.
    fill(b, "#lifecycle-prefix", "logs/");
    click(b, "#lifecycle-form button[type=submit]");
    b.wait_for(
        "the refusal",
        "(document.querySelector('#s3-settings .msg.error') || {}).textContent?.includes('lifecycle rule: give the days')",
        PAGE,
    );
    fill(b, "#lifecycle-id", "expire-logs");
    fill(b, "#lifecycle-days", "30");
    fill(b, "#lifecycle-abort", "2");
    click(b, "#lifecycle-form button[type=submit]");
    b.wait_for(
        "the lifecycle rule",
        "document.querySelector(\"button[data-lifecycle-remove='0']\")",
        PAGE,
    );
    let rules = &info()["lifecycleRules"];
    assert_eq!(
        rules,
        &serde_json::json!([{"id": "expire-logs", "enabled": true, "filter": "prefix \"logs/\"",
            "actions": ["expire 30 days after creation", "abort unfinished uploads after 2 days"]}]),
    );
    s3api_says(
        &["get-bucket-lifecycle-configuration"],
        &["\"logs/\"", "\"Days\": 30"],
    );
    shot_at(b, "bucket-settings", "#s3-settings");

    // A second CORS rule, then the first removed: the second stays.
    fill(b, "#cors-origins", "*");
    click(b, "#cors-form button[type=submit]");
    b.wait_for(
        "the second CORS rule",
        "document.querySelector(\"button[data-cors-remove='1']\")",
        PAGE,
    );
    click(b, "button[data-cors-remove='0']");
    b.wait_for(
        "one CORS rule left",
        "document.querySelector(\"button[data-cors-remove='0']\") && !document.querySelector(\"button[data-cors-remove='1']\")",
        PAGE,
    );
    let left = &info()["corsRules"];
    assert_eq!(left.as_array().map(Vec::len), Some(1), "{left}");
    assert_eq!(
        left[0]["allowedOrigins"],
        serde_json::json!(["*"]),
        "{left}"
    );
    // Changed underneath by another client, a rule is not removed blindly.
    let o = s3api(&[
        "put-bucket-cors",
        "--cors-configuration",
        r#"{"CORSRules": [{"AllowedOrigins": ["https://other.example"], "AllowedMethods": ["GET"]}]}"#,
    ]);
    assert!(o.status.success(), "{o:?}");
    click(b, "button[data-cors-remove='0']");
    b.wait_for(
        "the refusal",
        "(document.querySelector('#s3-settings .msg.error') || {}).textContent?.includes('the rules changed')",
        PAGE,
    );
    s3api_says(&["get-bucket-cors"], &["https://other.example"]);
    b.eval("window.dispatchEvent(new HashChangeEvent('hashchange'))");
    b.wait_for(
        "the page shown again",
        "(document.querySelector('#s3-settings table') || {textContent: ''}).textContent.includes('https://other.example')",
        PAGE,
    );
    // The last rules removed: S3 then has no configuration at all.
    click(b, "button[data-cors-remove='0']");
    click_when(b, "button[data-lifecycle-remove='0']");
    b.wait_for(
        "no rules left",
        "document.getElementById('cors-form') && !document.querySelector('[data-cors-remove], [data-lifecycle-remove]')",
        PAGE,
    );
    for (what, code) in [
        ("get-bucket-cors", "NoSuchCORSConfiguration"),
        (
            "get-bucket-lifecycle-configuration",
            "NoSuchLifecycleConfiguration",
        ),
    ] {
        let o = s3api(&[what]);
        assert!(
            !o.status.success() && String::from_utf8_lossy(&o.stderr).contains(code),
            "{what}: {o:?}"
        );
    }
    format!("#/bucket/{id}")
}

/// Clicks `selector` once the page has it (it may be re-rendering).
fn click_when(b: &mut Browser, selector: &str) {
    b.wait_for(
        selector,
        &format!("document.querySelector({})", js(selector)),
        PAGE,
    );
    click(b, selector);
}

/// A token scoped to reading the cluster and the buckets: the console
/// shows what it may read, says which parts its scope hides, shows the
/// API's refusal of a change it may not make (and nothing changes), and
/// stays logged in; once the token is revoked, the next page asks for a
/// token again.
#[test]
fn a_scoped_token_sees_only_its_scope() {
    use common::s3::{aws_ok, make_key};
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "writer");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), vec![7u8; 5000]).unwrap();
    aws_ok(&key, &ep, dir.path(), &["s3", "mb", "s3://seen"]);
    aws_ok(&key, &ep, dir.path(), &["s3", "cp", "f", "s3://seen/f"]);

    let (status, text) = admin_post(
        &base,
        "CreateAdminToken",
        r#"{"name": "viewer", "scope": ["GetCluster*", "ListBuckets", "GetBucketInfo"]}"#,
    );
    assert_eq!(status, 200, "{text}");
    let created: Value = serde_json::from_str(&text).unwrap();
    let viewer = created["secretToken"].as_str().unwrap().to_string();
    let viewer_id = created["id"].as_str().unwrap().to_string();

    let mut b = Browser::start(1280, 800);
    b.goto(&format!("{base}/ui/"));
    b.wait_for("the login form", "document.getElementById('token')", PAGE);
    fill(&mut b, "#token", &viewer);
    click(&mut b, "#login");
    b.wait_for(
        "the nodes",
        "document.querySelectorAll('section.zone').length === 1",
        PAGE,
    );
    let workers = text_of(&mut b, "#workers .msg.error");
    assert!(
        workers.contains("scope does not allow ListWorkers"),
        "{workers}"
    );
    shot(&mut b, "scoped-cluster");

    // The bucket list with its counts (GetBucketInfo is in the scope),
    // once the counters (published in the background) have the object.
    wait_until("the object counted", CLUSTER_DEADLINE, || {
        admin_get(&base, "GetBucketInfo?globalAlias=seen")["objects"] == 1
    });
    open(
        &mut b,
        "#/buckets",
        "the bucket and its counts",
        "[...document.querySelectorAll('#bucket-list td[data-objects]')].some(e => e.textContent === '1')",
    );
    assert!(text_of(&mut b, "#bucket-list").contains("5.0 KB"));
    // Creating a bucket is refused with the API's words; nothing is made,
    // and the token is kept.
    fill(&mut b, "#bucket-name", "not-allowed");
    click(&mut b, "#create-bucket button[type=submit]");
    b.wait_for(
        "the refusal",
        "(document.querySelector('.msg.error') || {}).textContent?.includes('scope does not allow CreateBucket')",
        PAGE,
    );
    assert_eq!(b.eval("document.getElementById('top').hidden"), false);
    assert!(!admin_get(&base, "ListBuckets")
        .to_string()
        .contains("not-allowed"));
    // A page whose main request is outside the scope says so, logged in.
    open(
        &mut b,
        "#/keys",
        "the keys page's refusal",
        "(document.querySelector('.msg.error') || {}).textContent?.includes('scope does not allow ListKeys')",
    );
    assert_eq!(b.eval("document.getElementById('top').hidden"), false);
    shot(&mut b, "scoped-keys");

    // Revoked, the token no longer opens any page.
    let (status, text) = admin_post(&base, &format!("DeleteAdminToken?id={viewer_id}"), "");
    assert_eq!(status, 200, "{text}");
    open(
        &mut b,
        "#/buckets",
        "the login form again",
        "document.getElementById('token') && (document.querySelector('.msg.error') || {}).textContent?.includes('unknown or expired')",
    );
}

/// The console's chart history (GetNodeMetricsHistory) outlives a restart
/// of the daemon: the samples taken before it are read back from the
/// metadata dir.
#[test]
fn the_chart_history_survives_a_restart() {
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let times = |base: &str| -> Vec<u64> {
        let h = admin_get(base, "GetNodeMetricsHistory?node=self");
        h["success"]
            .as_object()
            .and_then(|m| m.values().next().cloned())
            .map(|n| {
                n["samples"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["time"].as_u64().unwrap())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut before = Vec::new();
    wait_until("a first sample", CLUSTER_DEADLINE, || {
        before = times(&base);
        !before.is_empty()
    });
    c.kill(0);
    c.start(0);
    wait_until(
        "the old samples and a new one after the restart",
        CLUSTER_DEADLINE,
        || {
            let Ok(out) = Command::new("curl")
                .args(["-sS", "--max-time", "5", "-H"])
                .arg(format!("Authorization: Bearer {TOKEN}"))
                .arg(format!("{base}/v2/GetNodeMetricsHistory?node=self"))
                .output()
            else {
                return false;
            };
            if !out.status.success() || serde_json::from_slice::<Value>(&out.stdout).is_err() {
                return false;
            }
            let after = times(&base);
            after.len() > before.len() && after.starts_with(&before)
        },
    );
}

/// Waits until `ready` (a script expression, false while the page loads)
/// holds, showing the current page again every second meanwhile: for what
/// a page reads once, such as a backlog.
fn wait_reloading(b: &mut Browser, what: &str, ready: &str) {
    b.wait_for(
        what,
        &format!(
            "(() => {{ if ({ready}) {{ clearTimeout(window.__reload); window.__reload = null; return true; }} \
             if (!window.__reload) {{ window.__reload = setTimeout(() => {{ window.__reload = null; \
             window.dispatchEvent(new HashChangeEvent('hashchange')); }}, 1000); }} return false; }})()"
        ),
        CLUSTER_DEADLINE,
    );
}

/// Notification topics and replication remotes from their pages, on one
/// node. A topic is made through the form (a bad endpoint refused with the
/// API's words), listed, shown with the event a bucket's rule left in the
/// outbox (its endpoint does not answer), and deleted. A remote is added
/// through the form (a bad endpoint refused), listed with the ARN its
/// buckets go by, its secret nowhere in the page, the API's answers or the
/// node's log; a bucket's replication rule to it is shown on the bucket's
/// page, the version it queued on the remote's page; the remote is
/// deleted (its queue with it).
#[test]
fn topics_and_remotes_from_the_console() {
    use common::s3::{aws_ok, make_key};
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "events");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"an event and a version").unwrap();
    let cli = |args: &[&str]| aws_ok(&key, &ep, dir.path(), args);

    let mut b = Browser::start(1280, 800);
    b.goto(&format!("{base}/ui/"));
    b.wait_for("the login form", "document.getElementById('token')", PAGE);
    fill(&mut b, "#token", TOKEN);
    click(&mut b, "#login");
    b.wait_for(
        "the nodes",
        "document.querySelectorAll('section.zone').length === 1",
        PAGE,
    );
    b.eval("window.confirm = () => true");

    // A topic. An AMQP endpoint without its exchange is refused, with the
    // API's words, and nothing is made.
    open(
        &mut b,
        "#/topics",
        "the topics page",
        "document.getElementById('create-topic')",
    );
    fill(&mut b, "#topic-name", "console-hook");
    fill(&mut b, "#topic-endpoint", "amqp://127.0.0.1:9");
    click(&mut b, "#create-topic button[type=submit]");
    b.wait_for(
        "the refusal",
        "(document.querySelector('#topics-msg .msg.error') || {}).textContent?.includes('amqp-exchange')",
        PAGE,
    );
    assert_eq!(admin_get(&base, "ListTopics"), serde_json::json!([]));
    fill(&mut b, "#topic-endpoint", "http://127.0.0.1:9/x");
    fill(&mut b, "#topic-attributes", "OpaqueData=from-the-console");
    click(&mut b, "#create-topic button[type=submit]");
    b.wait_for(
        "the topic listed",
        "document.querySelector(\"a[data-topic='console-hook']\")",
        PAGE,
    );
    let listed = text_of(&mut b, "#view table");
    assert!(
        listed.contains("webhook")
            && listed.contains("127.0.0.1:9/x")
            && listed.contains("arn:aws:sns:garage::console-hook"),
        "{listed}"
    );
    let said = text_of(&mut b, "#topics-msg");
    assert!(said.contains("Topic console-hook created"), "{said}");
    let t = admin_get(&base, "GetTopicInfo?name=console-hook");
    assert_eq!(t["attributes"]["OpaqueData"], "from-the-console", "{t}");
    shot(&mut b, "topics");

    // A bucket's rule sends its events there: the endpoint does not
    // answer, so the event waits in the node's outbox, and the topic's
    // page shows it.
    cli(&["s3", "mb", "s3://watched"]);
    let rule = serde_json::json!({"TopicConfigurations": [{
        "Id": "all", "TopicArn": "arn:aws:sns:garage::console-hook",
        "Events": ["s3:ObjectCreated:*"]}]});
    cli(&[
        "s3api",
        "put-bucket-notification-configuration",
        "--bucket",
        "watched",
        "--notification-configuration",
        &rule.to_string(),
    ]);
    cli(&["s3", "cp", "f", "s3://watched/f"]);
    click(&mut b, "a[data-topic='console-hook']");
    b.wait_for(
        "the topic's page",
        "document.getElementById('delete-topic')",
        PAGE,
    );
    assert_eq!(
        text_of(&mut b, "dd[data-fact='ARN']"),
        "arn:aws:sns:garage::console-hook"
    );
    assert!(text_of(&mut b, "#view table").contains("from-the-console"));
    wait_reloading(
        &mut b,
        "the event in the topic's backlog",
        "[...document.querySelectorAll('#topic-backlog tbody tr')].some(r => r.children.length === 3 && Number(r.children[1].textContent) >= 1)",
    );
    let node = &c.nodes[0].id()[..16];
    let backlog = text_of(&mut b, "#topic-backlog");
    assert!(backlog.contains(node), "{backlog}");
    shot(&mut b, "topic");

    // Deleted from its page: listed no more, and its page says so.
    click(&mut b, "#delete-topic");
    b.wait_for(
        "the topic list without it",
        "location.hash === '#/topics' && document.getElementById('create-topic') && !document.querySelector(\"a[data-topic='console-hook']\")",
        PAGE,
    );
    assert_eq!(admin_get(&base, "ListTopics"), serde_json::json!([]));
    open(
        &mut b,
        "#/topic/console-hook",
        "the API's refusal",
        "(document.querySelector('.msg.error') || {}).textContent?.includes('no notification topic console-hook')",
    );

    // A remote. An endpoint with a path is refused, with the API's words.
    let secret = "remote-secret-5f0e8c21d7a94b36";
    c.note_secret(secret);
    open(
        &mut b,
        "#/remotes",
        "the remotes page",
        "document.getElementById('add-remote')",
    );
    assert_eq!(
        b.eval("document.getElementById('remote-secret').type"),
        "password"
    );
    fill(&mut b, "#remote-name", "dr");
    fill(&mut b, "#remote-endpoint", "http://127.0.0.1:9/a-path");
    fill(&mut b, "#remote-key-id", "GK0123456789abcdef01234567");
    fill(&mut b, "#remote-secret", secret);
    click(&mut b, "#add-remote button[type=submit]");
    b.wait_for(
        "the refusal",
        "(document.querySelector('#remotes-msg .msg.error') || {}).textContent?.includes('has a path')",
        PAGE,
    );
    assert_eq!(admin_get(&base, "ListRemotes"), serde_json::json!([]));
    fill(&mut b, "#remote-endpoint", "http://127.0.0.1:9");
    click(&mut b, "#add-remote button[type=submit]");
    b.wait_for(
        "the remote listed",
        "document.querySelector(\"a[data-remote='dr']\")",
        PAGE,
    );
    assert_eq!(
        text_of(&mut b, "code[data-arn='dr']"),
        "arn:garage:s3:::dr/<bucket>"
    );
    let said = text_of(&mut b, "#remotes-msg");
    assert!(said.contains("arn:garage:s3:::dr/<bucket>"), "{said}");
    // The secret is nowhere in the page (markup, text or field values),
    // nor in the API's answers.
    let no_secret = format!(
        "!(document.documentElement.outerHTML + document.body.innerText + \
         [...document.querySelectorAll('input, textarea')].map(e => e.value).join(' ')).includes({})",
        js(secret)
    );
    assert_eq!(
        b.eval(&no_secret),
        Value::Bool(true),
        "the secret is in the page"
    );
    let r = admin_get(&base, "GetRemoteInfo?name=dr");
    assert!(
        r["endpoint"].as_str().unwrap().contains("127.0.0.1:9")
            && r["accessKeyId"] == "GK0123456789abcdef01234567"
            && !r.to_string().contains(secret),
        "{r}"
    );
    assert!(!admin_get(&base, "ListRemotes").to_string().contains(secret));
    shot(&mut b, "remotes");

    // A bucket replicated to the remote: its rule on the bucket's page,
    // and the version it queued (the remote does not answer) on the
    // remote's page.
    cli(&["s3api", "create-bucket", "--bucket", "replicated"]);
    cli(&[
        "s3api",
        "put-bucket-versioning",
        "--bucket",
        "replicated",
        "--versioning-configuration",
        "Status=Enabled",
    ]);
    let config = serde_json::json!({
        "Role": "arn:aws:iam::000000000000:role/replication",
        "Rules": [{
            "ID": "to-dr", "Priority": 3, "Status": "Enabled",
            "Filter": {"Prefix": "docs/"},
            "DeleteMarkerReplication": {"Status": "Enabled"},
            "Destination": {"Bucket": "arn:garage:s3:::dr/copy"},
        }]
    });
    cli(&[
        "s3api",
        "put-bucket-replication",
        "--bucket",
        "replicated",
        "--replication-configuration",
        &config.to_string(),
    ]);
    cli(&["s3", "cp", "f", "s3://replicated/docs/f"]);
    let id = admin_get(&base, "GetBucketInfo?globalAlias=replicated")["id"]
        .as_str()
        .unwrap()
        .to_string();
    open(
        &mut b,
        &format!("#/bucket/{id}"),
        "the bucket's replication rules",
        "document.querySelector('#replication tbody tr')",
    );
    let rules = text_of(&mut b, "#replication tbody");
    for want in [
        "to-dr",
        "3",
        "enabled",
        "docs/",
        "arn:garage:s3:::dr/copy",
        "replicated",
    ] {
        assert!(rules.contains(want), "{want} in {rules}");
    }
    shot_at(&mut b, "bucket-replication", "#replication");
    click(&mut b, "#replication a[data-remote='dr']");
    b.wait_for(
        "the remote's page",
        "document.getElementById('delete-remote')",
        PAGE,
    );
    assert_eq!(
        text_of(&mut b, "#remote-arn"),
        "arn:garage:s3:::dr/<bucket>"
    );
    wait_reloading(
        &mut b,
        "the version in the remote's backlog",
        "[...document.querySelectorAll('#remote-backlog tbody tr')].some(r => r.children.length === 5 && r.children[1].textContent === 'dr/copy' && Number(r.children[2].textContent) >= 1)",
    );
    assert_eq!(
        b.eval(&no_secret),
        Value::Bool(true),
        "the secret is in the page"
    );
    shot(&mut b, "remote");

    // Deleted from the list: gone, and its queue with it.
    open(
        &mut b,
        "#/remotes",
        "the remotes page",
        "document.querySelector(\"button[data-remote-delete='dr']\")",
    );
    click(&mut b, "button[data-remote-delete='dr']");
    b.wait_for(
        "the remote list without it",
        "document.getElementById('add-remote') && !document.querySelector(\"a[data-remote='dr']\")",
        PAGE,
    );
    assert_eq!(admin_get(&base, "ListRemotes"), serde_json::json!([]));
    wait_until("the remote's queue emptied", CLUSTER_DEADLINE, || {
        !admin_get(&base, "GetReplicationBacklog?node=*")
            .to_string()
            .contains("dr/copy")
    });
    c.assert_no_secret_logged();
}

/// A policy letting each user of its group keep its own folder of the
/// `photos` bucket.
const OWN_FOLDER: &str = r#"{"Version": "2012-10-17", "Statement": [
  {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
   "Resource": "arn:aws:s3:::photos/${aws:username}/*"},
  {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::photos",
   "Condition": {"StringLike": {"s3:prefix": ["${aws:username}/*"]}}}]}"#;

/// IamCall with the admin token: its answer.
fn iam_call(base: &str, action: &str, params: Value) -> Value {
    let body = serde_json::json!({"action": action, "params": params}).to_string();
    let (status, text) = admin_post(base, "IamCall", &body);
    assert_eq!(status, 200, "{action}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// The identities pages, on one node: a group, a managed policy (a
/// condition not served is refused first, with the server's words naming
/// it), attached to the group; a user added to the group, with an access
/// key made in the page whose secret is shown once. aws-cli then writes
/// with that key under the user's own folder and is refused elsewhere; an
/// inline policy put in the page denies deletes; the key made inactive,
/// then the user disabled in the page, are refused. Deleting a user with
/// a key shows the API's DeleteConflict. An OpenID Connect provider and a
/// role trusting it are made and the role disabled; the user's page fits
/// a phone; a token whose scope does not allow IamCall sees "Not shown".
/// The secret is in neither the node's log nor the page once it is
/// shown again.
#[test]
fn identities_from_the_console() {
    use crate::iam::refused;
    use common::s3::aws_ok;
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    // A bucket with no key allowed on it: the identity policy alone
    // decides.
    c.garage_ok(0, &["bucket", "create", "photos"]);
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("f"), b"alice's photo").unwrap();

    let mut b = Browser::start(1280, 800);
    b.goto(&format!("{base}/ui/"));
    b.wait_for("the login form", "document.getElementById('token')", PAGE);
    fill(&mut b, "#token", TOKEN);
    click(&mut b, "#login");
    b.wait_for(
        "the nodes",
        "document.querySelectorAll('section.zone').length === 1",
        PAGE,
    );
    b.eval("window.confirm = () => true");

    // A group.
    click(&mut b, "#nav-iam");
    b.wait_for(
        "the users page",
        "document.getElementById('create-user')",
        PAGE,
    );
    open(
        &mut b,
        "#/groups",
        "the groups page",
        "document.getElementById('create-group')",
    );
    fill(&mut b, "#group-name", "photographers");
    click(&mut b, "#create-group button[type=submit]");
    b.wait_for(
        "the group listed",
        "document.querySelector(\"a[data-group='photographers']\")",
        PAGE,
    );

    // A managed policy. A condition key not served is refused, with the
    // server's words naming it, and nothing is made.
    open(
        &mut b,
        "#/policies",
        "the policies page with AWS's built-ins",
        "document.querySelector(\"a[data-policy='AdministratorAccess']\")",
    );
    let bad = r#"{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*", "Condition": {"StringEquals": {"ec2:Vpc": "vpc-1"}}}]}"#;
    fill(&mut b, "#policy-name", "own-folder");
    fill(&mut b, "#policy-document", bad);
    click(&mut b, "#create-policy button[type=submit]");
    b.wait_for(
        "the refusal naming the condition",
        "(document.querySelector('#create-policy-msg .msg.error') || {}).textContent?.includes('ec2:Vpc')",
        PAGE,
    );
    let said = text_of(&mut b, "#create-policy-msg");
    let local = iam_call(&base, "ListPolicies", serde_json::json!({"Scope": "Local"}));
    assert_eq!(local["Policies"], serde_json::json!([]), "{said}: {local}");
    fill(&mut b, "#policy-document", OWN_FOLDER);
    click(&mut b, "#create-policy button[type=submit]");
    b.wait_for(
        "the policy listed",
        "document.querySelector(\"a[data-policy='own-folder']\")",
        PAGE,
    );
    let said = text_of(&mut b, "#create-policy-msg");
    assert!(said.contains("arn:aws:iam:::policy/own-folder"), "{said}");
    shot(&mut b, "iam-policies");
    click(&mut b, "a[data-policy='own-folder']");
    b.wait_for(
        "the policy's document",
        "(document.getElementById('policy-document-view') || {}).textContent?.includes('photos/${aws:username}/*')",
        PAGE,
    );
    shot(&mut b, "iam-policy");

    // Attached to the group from the group's page.
    open(
        &mut b,
        "#/group/photographers",
        "the group's page",
        "document.getElementById('attach-arn')",
    );
    fill(&mut b, "#attach-arn", "arn:aws:iam:::policy/own-folder");
    click(&mut b, "#attach-policy button[type=submit]");
    b.wait_for(
        "the policy attached",
        "document.querySelector(\"a[data-attached='own-folder']\")",
        PAGE,
    );
    let attached = iam_call(
        &base,
        "ListAttachedGroupPolicies",
        serde_json::json!({"GroupName": "photographers"}),
    );
    assert_eq!(
        attached["AttachedPolicies"][0]["PolicyArn"], "arn:aws:iam:::policy/own-folder",
        "{attached}"
    );

    // A user, added to the group, with an access key whose secret the
    // page shows once.
    open(
        &mut b,
        "#/users",
        "the users page",
        "document.getElementById('create-user')",
    );
    fill(&mut b, "#user-name", "alice");
    click(&mut b, "#create-user button[type=submit]");
    b.wait_for(
        "the user listed",
        "document.querySelector(\"a[data-user='alice']\")",
        PAGE,
    );
    click(&mut b, "a[data-user='alice']");
    b.wait_for(
        "the user's page",
        "document.getElementById('create-access-key') && document.getElementById('user-add-group')",
        PAGE,
    );
    fill(&mut b, "#user-add-group", "photographers");
    click(&mut b, "#add-to-group button[type=submit]");
    b.wait_for(
        "the user in the group",
        "(document.querySelector('#user-groups tbody') || {}).textContent?.includes('photographers')",
        PAGE,
    );
    open(
        &mut b,
        "#/group/photographers",
        "the group's page with alice",
        "(document.querySelector('#members tbody') || {}).textContent?.includes('alice')",
    );
    assert!(text_of(&mut b, "#policies-of").contains("own-folder"));
    shot(&mut b, "iam-group");
    open(
        &mut b,
        "#/user/alice",
        "the user's page",
        "document.getElementById('create-access-key')",
    );
    click(&mut b, "#create-access-key");
    b.wait_for(
        "the new key's secret",
        "document.getElementById('new-access-key-secret')",
        PAGE,
    );
    let id = text_of(&mut b, "#new-access-key-id");
    let secret = text_of(&mut b, "#new-access-key-secret");
    assert!(
        id.starts_with("AKIA") && secret.len() == 40,
        "{id} {secret}"
    );
    c.note_secret(&secret);
    assert!(text_of(&mut b, "#iam-secret").contains("shown this once"));
    assert!(text_of(&mut b, "#access-keys tbody").contains(&id));
    shot(&mut b, "iam-user");
    let alice = (id.clone(), secret.clone());

    // The key writes in alice's folder only.
    aws_ok(&alice, &ep, d, &["s3", "cp", "f", "s3://photos/alice/x"]);
    refused(
        &alice,
        &ep,
        d,
        &["s3", "cp", "f", "s3://photos/bob/x"],
        "AccessDenied",
    );

    // The secret is shown once: the page shown again has it nowhere, nor
    // has any answer of the API.
    open(
        &mut b,
        "#/users",
        "the user list with alice's group",
        "(document.querySelector(\"td[data-user-groups='alice']\") || {}).textContent === 'photographers'",
    );
    open(
        &mut b,
        "#/user/alice",
        "the user's page",
        "document.getElementById('create-access-key')",
    );
    let no_secret = format!(
        "!(document.documentElement.outerHTML + document.body.innerText + \
         [...document.querySelectorAll('input, textarea')].map(e => e.value).join(' ')).includes({})",
        js(&secret)
    );
    assert_eq!(
        b.eval(&no_secret),
        Value::Bool(true),
        "the secret is shown again"
    );
    let keys = iam_call(
        &base,
        "ListAccessKeys",
        serde_json::json!({"UserName": "alice"}),
    );
    assert!(!keys.to_string().contains(&secret), "{keys}");

    // Deleting a user who has a key: the API's DeleteConflict, as it is.
    click(&mut b, "#delete-user");
    b.wait_for(
        "the delete conflict",
        "(document.querySelector('#user-msg .msg.error') || {}).textContent?.includes('must remove access keys first')",
        PAGE,
    );

    // An inline policy put in the page: deletes are denied (an explicit
    // deny wins over the group's allow); viewed, then deleted.
    let no_deletes = r#"{"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::photos/*"}]}"#;
    fill(&mut b, "#inline-name", "no-deletes");
    fill(&mut b, "#inline-doc", no_deletes);
    click(&mut b, "#put-inline button[type=submit]");
    b.wait_for(
        "the inline policy listed",
        "document.querySelector(\"button[data-inline-view='no-deletes']\")",
        PAGE,
    );
    click(&mut b, "button[data-inline-view='no-deletes']");
    b.wait_for(
        "the inline policy's document",
        "(document.getElementById('inline-document') || {}).textContent?.includes('s3:DeleteObject')",
        PAGE,
    );
    refused(
        &alice,
        &ep,
        d,
        &["s3", "rm", "s3://photos/alice/x"],
        "AccessDenied",
    );
    click(&mut b, "button[data-inline-delete='no-deletes']");
    b.wait_for(
        "the inline policy deleted",
        "(document.querySelector('#inline-msg .msg.ok') || {}).textContent?.includes('no-deletes deleted')",
        PAGE,
    );
    let inline = iam_call(
        &base,
        "ListUserPolicies",
        serde_json::json!({"UserName": "alice"}),
    );
    assert_eq!(inline["PolicyNames"], serde_json::json!([]), "{inline}");

    // The key made inactive, then active again, from the page.
    click(&mut b, &format!("button[data-key-toggle='{id}']"));
    b.wait_for(
        "the key inactive",
        &format!("(document.querySelector(\"span[data-key-status='{id}']\") || {{}}).textContent === 'Inactive'"),
        PAGE,
    );
    refused(
        &alice,
        &ep,
        d,
        &["s3", "cp", "f", "s3://photos/alice/y"],
        "AccessDenied",
    );
    click(&mut b, &format!("button[data-key-toggle='{id}']"));
    b.wait_for(
        "the key active",
        &format!("(document.querySelector(\"span[data-key-status='{id}']\") || {{}}).textContent === 'Active'"),
        PAGE,
    );
    aws_ok(&alice, &ep, d, &["s3", "cp", "f", "s3://photos/alice/y"]);

    // The user disabled from the page: the key is refused.
    click(&mut b, "#disable-user");
    b.wait_for(
        "the user disabled",
        "(document.querySelector('#user-msg .msg.ok') || {}).textContent?.includes('alice disabled')",
        PAGE,
    );
    let state = text_of(&mut b, "dd[data-fact='Enabled']");
    assert_eq!(state, "no");
    assert!(
        b.eval("document.querySelector('#disable-user') === null && document.querySelector('#enable-user') !== null")
            == serde_json::json!(true),
        "a disabled user offers Enable only"
    );
    refused(
        &alice,
        &ep,
        d,
        &["s3", "cp", "f", "s3://photos/alice/z"],
        "AccessDenied",
    );

    // An OpenID Connect provider, and a role its tokens may assume.
    open(
        &mut b,
        "#/oidc-providers",
        "the providers page",
        "document.getElementById('create-provider')",
    );
    fill(&mut b, "#provider-url", "http://127.0.0.1:4444");
    fill(&mut b, "#provider-clients", "garage console");
    click(&mut b, "#create-provider button[type=submit]");
    b.wait_for(
        "the provider listed",
        "document.querySelector(\"code[data-provider='arn:aws:iam:::oidc-provider/127.0.0.1:4444']\")",
        PAGE,
    );
    let listed = text_of(&mut b, "#view table");
    assert!(
        listed.contains("console, garage") && listed.contains("127.0.0.1:4444"),
        "{listed}"
    );
    let trust = r#"{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Federated": "arn:aws:iam:::oidc-provider/127.0.0.1:4444"}, "Action": "sts:AssumeRoleWithWebIdentity", "Condition": {"StringEquals": {"127.0.0.1:4444:aud": "garage"}}}]}"#;
    open(
        &mut b,
        "#/roles",
        "the roles page",
        "document.getElementById('create-role')",
    );
    fill(&mut b, "#role-name", "photographer");
    fill(&mut b, "#role-trust", trust);
    click(&mut b, "#create-role button[type=submit]");
    b.wait_for(
        "the role listed",
        "document.querySelector(\"a[data-role='photographer']\")",
        PAGE,
    );
    click(&mut b, "a[data-role='photographer']");
    b.wait_for(
        "the role's page",
        "(document.getElementById('role-trust-edit') || {}).value?.includes('127.0.0.1:4444:aud')",
        PAGE,
    );
    assert_eq!(
        text_of(&mut b, "#role-arn"),
        "arn:aws:iam:::role/photographer"
    );
    click(&mut b, "#disable-role");
    b.wait_for(
        "the role disabled",
        "(document.querySelector('#role-msg .msg.ok') || {}).textContent?.includes('photographer disabled')",
        PAGE,
    );
    shot(&mut b, "iam-role");

    // The user's page on a phone: no horizontal scrolling.
    b.viewport(390, 844, true);
    open(
        &mut b,
        "#/user/alice",
        "the user's page",
        "document.getElementById('create-access-key')",
    );
    assert!(
        b.eval("document.documentElement.scrollWidth <= window.innerWidth + 1")
            == Value::Bool(true),
        "no horizontal scrolling on a phone (user page)"
    );
    shot_at(&mut b, "iam-user-phone", "#access-keys");
    b.viewport(1280, 800, false);

    // A token whose scope does not allow IamCall: the pages say so, and
    // the operator stays logged in.
    let (status, text) = admin_post(
        &base,
        "CreateAdminToken",
        r#"{"name": "no-iam", "scope": ["GetCluster*"]}"#,
    );
    assert_eq!(status, 200, "{text}");
    let scoped: Value = serde_json::from_str(&text).unwrap();
    click(&mut b, "#logout");
    b.wait_for("the login form", "document.getElementById('token')", PAGE);
    fill(&mut b, "#token", scoped["secretToken"].as_str().unwrap());
    click(&mut b, "#login");
    b.wait_for(
        "the nodes",
        "document.querySelectorAll('section.zone').length === 1",
        PAGE,
    );
    for page in ["#/users", "#/policies", "#/roles"] {
        open(
            &mut b,
            page,
            "the scope's refusal",
            "(document.querySelector('#view .msg.error') || {}).textContent?.includes('Not shown: this admin token\\'s scope does not allow IamCall')",
        );
        assert_eq!(b.eval("document.getElementById('top').hidden"), false);
    }
    c.assert_no_secret_logged();
}
