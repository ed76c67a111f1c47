"""The plugin process as the host sees it: handshake, mutual TLS, the
go-plugin services, validation and error statuses, logging, shutdown."""

import base64
import datetime
import json
import os
import subprocess
import sys
import tempfile
import unittest

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from memhost_plugin import plugin_pb2 as pb

PLUGIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memplugin.py")
COOKIE = {"MEMHOST_PLUGIN_COOKIE": "5f0c0a3e9d2b4c71a8e6f3b2d9c4e1a7"}


def client_certificate():
    """A P-256 self-signed CA certificate for localhost, as the host makes."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def unary(channel, service, method, req, resp_cls, **kw):
    call = channel.unary_unary("/%s/%s" % (service, method), request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=resp_cls.FromString)
    return call(req, timeout=10, **kw)


class PluginProcessTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sockets = tempfile.mkdtemp(prefix="mhsock-")
        cls.cert, cls.key = client_certificate()
        env = dict(os.environ, PLUGIN_UNIX_SOCKET_DIR=cls.sockets, PLUGIN_CLIENT_CERT=cls.cert.decode(),
                   PLUGIN_PROTOCOL_VERSIONS="1", MEMHOST_LOG_LEVEL="debug", **COOKIE)
        cls.proc = subprocess.Popen([sys.executable, "-B", PLUGIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        cls.line = cls.proc.stdout.readline().decode()
        parts = cls.line.rstrip("\n").split("|")
        server_der = base64.b64decode(parts[5] + "=" * (-len(parts[5]) % 4))
        server_pem = x509.load_der_x509_certificate(server_der).public_bytes(serialization.Encoding.PEM)
        creds = grpc.ssl_channel_credentials(root_certificates=server_pem, private_key=cls.key, certificate_chain=cls.cert)
        cls.channel = grpc.secure_channel("unix:" + parts[3], creds, options=(("grpc.ssl_target_name_override", "localhost"),))
        unary(cls.channel, "memhost.plugin.v1.Plugin", "Configure", pb.ConfigureRequest(config_json=b"{}"), pb.ConfigureResponse)

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.kill()
            cls.proc.wait()
        cls.channel.close()
        cls.proc.stdout.close()
        cls.proc.stderr.close()

    def test_handshake_line(self):
        parts = self.line.rstrip("\n").split("|")
        self.assertEqual(parts[:3], ["1", "1", "unix"])
        self.assertEqual(parts[4], "grpc")
        self.assertTrue(parts[3].startswith(self.sockets + "/plugin"), parts[3])
        self.assertNotIn("=", parts[5], "the certificate is base64 without padding")

    def test_info(self):
        info = unary(self.channel, "memhost.plugin.v1.Plugin", "Info", pb.InfoRequest(), pb.InfoResponse)
        self.assertEqual((info.name, info.version, list(info.kinds), list(info.protocol_versions)), ("memtest", "1.2.3", ["provider"], [1]))
        self.assertIn("write", info.capabilities)
        self.assertNotIn("ledger", info.capabilities)

    def test_health(self):
        call = self.channel.unary_unary("/grpc.health.v1.Health/Check")
        self.assertEqual(call(b"\n\x06plugin", timeout=10), b"\x08\x01")

    def status_of(self, method, req, resp_cls):
        with self.assertRaises(grpc.RpcError) as cm:
            unary(self.channel, "memhost.plugin.v1.Provider", method, req, resp_cls)
        e = cm.exception
        details = dict(e.trailing_metadata() or ()).get("grpc-status-details-bin", b"")
        return e.code(), e.details(), details

    def test_refusals(self):
        big = pb.RecordInput(scope="realm", kind="fact", title="t", body="x" * (64 * 1024 + 1))
        cases = [
            ("Recall", pb.RecallRequest(realm="../x"), pb.RecallResponse, grpc.StatusCode.INVALID_ARGUMENT, b"realm"),
            ("Recall", pb.RecallRequest(realm="a", scopes=["realm", "team:x"]), pb.RecallResponse, grpc.StatusCode.INVALID_ARGUMENT, b"scopes[1]"),
            ("Recall", pb.RecallRequest(realm="a", limit=-1), pb.RecallResponse, grpc.StatusCode.INVALID_ARGUMENT, b"limit"),
            ("Remember", pb.RememberRequest(realm="a", records=[big]), pb.RememberResponse, grpc.StatusCode.OUT_OF_RANGE, b"records[0].body"),
            ("Get", pb.GetRequest(realm="a", ids=["x"] * 1001), pb.GetResponse, grpc.StatusCode.OUT_OF_RANGE, b"ids"),
            ("Manifest", pb.ManifestRequest(realm="a", tier=0), pb.ManifestResponse, grpc.StatusCode.INVALID_ARGUMENT, b"tier"),
            ("WriteLedger", pb.WriteLedgerRequest(), pb.WriteLedgerResponse, grpc.StatusCode.UNIMPLEMENTED, b""),
            ("Reindex", pb.ReindexRequest(), pb.ReindexResponse, grpc.StatusCode.UNIMPLEMENTED, b""),
        ]
        for method, req, resp_cls, code, field in cases:
            with self.subTest(method=method, field=field):
                if method in ("Manifest", "Reindex"):
                    call = self.channel.unary_stream("/memhost.plugin.v1.Provider/" + method,
                                                     request_serializer=lambda m: m.SerializeToString(), response_deserializer=resp_cls.FromString)
                    with self.assertRaises(grpc.RpcError) as cm:
                        list(call(req, timeout=10))
                    got = cm.exception.code()
                    details = dict(cm.exception.trailing_metadata() or ()).get("grpc-status-details-bin", b"")
                else:
                    got, _, details = self.status_of(method, req, resp_cls)
                self.assertEqual(got, code)
                if field:
                    self.assertIn(b"google.rpc.BadRequest", details)
                    self.assertIn(field, details)

    def test_duplicate_answers_stored_id(self):
        rec = pb.RecordInput(scope="realm", kind="fact", title="same", body="b")
        ok = unary(self.channel, "memhost.plugin.v1.Provider", "Remember", pb.RememberRequest(realm="dup", records=[rec]), pb.RememberResponse)
        again = unary(self.channel, "memhost.plugin.v1.Provider", "Remember", pb.RememberRequest(realm="dup", records=[rec, rec]), pb.RememberResponse)
        self.assertEqual(list(again.ids), list(ok.ids) * 2, "the same content in the same scope answers the stored id")


class PluginLifecycleTest(unittest.TestCase):
    def start(self, extra_env=None):
        sockets = tempfile.mkdtemp(prefix="mhsock-")
        env = dict(os.environ, PLUGIN_UNIX_SOCKET_DIR=sockets, **COOKIE)
        env.update(extra_env or {})
        proc = subprocess.Popen([sys.executable, "-B", PLUGIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        def stop():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        self.addCleanup(stop)
        return proc

    def test_exits_when_its_host_is_gone_before_it_looked(self):
        # A pid no process holds: a child run and reaped. The plugin's
        # parent (this test) lives on, so only the host's pid tells it the
        # host died before the plugin first read its parent.
        child = subprocess.Popen(["true"])
        child.wait()
        proc = self.start({"MEMHOST_HOST_PID": str(child.pid)})
        self.assertEqual(proc.wait(timeout=30), 0)
        self.assertIn(b"host process is gone", proc.stderr.read())

    def test_storage_full_is_all_or_nothing(self):
        proc = self.start()
        parts = proc.stdout.readline().decode().rstrip("\n").split("|")
        channel = grpc.insecure_channel("unix:" + parts[3])
        self.addCleanup(channel.close)
        unary(channel, "memhost.plugin.v1.Plugin", "Configure", pb.ConfigureRequest(config_json=b'{"fail_title":"boom"}'), pb.ConfigureResponse)
        recs = [pb.RecordInput(scope="realm", kind="fact", title="fine", body="kept only with its batch"),
                pb.RecordInput(scope="realm", kind="fact", title="boom", body="b")]
        with self.assertRaises(grpc.RpcError) as cm:
            unary(channel, "memhost.plugin.v1.Provider", "Remember", pb.RememberRequest(realm="a", records=recs), pb.RememberResponse)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        details = dict(cm.exception.trailing_metadata()).get("grpc-status-details-bin", b"")
        self.assertIn(b"STORAGE_FULL", details)
        hits = unary(channel, "memhost.plugin.v1.Provider", "Recall", pb.RecallRequest(realm="a", query="batch"), pb.RecallResponse)
        self.assertEqual(len(hits.hits), 0, "a refused batch stored a record")

    def test_no_cookie_is_refused(self):
        env = dict(os.environ)
        env.pop("MEMHOST_PLUGIN_COOKIE", None)
        proc = subprocess.run([sys.executable, "-B", PLUGIN], env=env, capture_output=True, timeout=60)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stdout, b"")
        self.assertIn(b"not run by hand", proc.stderr)

    def test_other_protocol_is_refused(self):
        proc = self.start({"PLUGIN_PROTOCOL_VERSIONS": "2,3"})
        self.assertEqual(proc.wait(timeout=60), 1)
        self.assertIn(b"speaks protocols 2,3", proc.stderr.read())

    def test_shutdown_and_log_lines(self):
        proc = self.start({"MEMHOST_LOG_LEVEL": "info"})
        parts = proc.stdout.readline().decode().rstrip("\n").split("|")
        self.assertEqual(parts[5], "", "no client certificate, no server certificate")
        channel = grpc.insecure_channel("unix:" + parts[3])
        self.addCleanup(channel.close)
        unary(channel, "memhost.plugin.v1.Plugin", "Configure", pb.ConfigureRequest(config_json=b'{"fail_title":"x"}'),
              pb.ConfigureResponse, metadata=(("memhost-request-id", "req-42"),))
        with self.assertRaises(grpc.RpcError) as cm:
            unary(channel, "memhost.plugin.v1.Plugin", "Configure", pb.ConfigureRequest(config_json=b'{"nope":1}'), pb.ConfigureResponse)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.ALREADY_EXISTS)
        channel.unary_unary("/plugin.GRPCController/Shutdown")(b"", timeout=10)
        self.assertEqual(proc.wait(timeout=60), 0)
        lines = [json.loads(line) for line in proc.stderr.read().decode().splitlines()]
        configured = [line for line in lines if line["@message"] == "configured"]
        self.assertEqual(len(configured), 1, lines)
        self.assertEqual((configured[0]["@level"], configured[0]["fail_title"], configured[0]["request_id"]), ("info", "x", "req-42"))
        self.assertRegex(configured[0]["@timestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

    def test_unknown_config_key(self):
        proc = self.start()
        parts = proc.stdout.readline().decode().rstrip("\n").split("|")
        channel = grpc.insecure_channel("unix:" + parts[3])
        self.addCleanup(channel.close)
        for config, field in ((b'{"nope":1}', b"nope"), (b'{"fail_title":3}', b"fail_title"), (b"[]", b"config")):
            with self.subTest(config=config):
                with self.assertRaises(grpc.RpcError) as cm:
                    unary(channel, "memhost.plugin.v1.Plugin", "Configure", pb.ConfigureRequest(config_json=config), pb.ConfigureResponse)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(field, dict(cm.exception.trailing_metadata()).get("grpc-status-details-bin", b""))


if __name__ == "__main__":
    unittest.main()
