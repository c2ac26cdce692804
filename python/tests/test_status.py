"""ruda.Status against its one definition, enum Status of proto/ruda.proto
(from which the C side's ruda_status and ruda_strerror are generated): the
same values under the same names (the proto's without ERROR_), an exception
class for each error, and libruda's text for each."""

import os
import re

import ruda
import ruda.client
import ruda.errors
from conftest import ROOT


def proto_statuses():
    with open(os.path.join(ROOT, "proto", "ruda.proto")) as f:
        text = f.read()
    body = re.search(r"^enum Status \{\n(.*?)^\}", text, re.M | re.S).group(1)
    values = re.findall(r"^\s*([A-Z][A-Z0-9_]*) = (\d+);", body, re.M)
    texts = re.findall(r'^\s*// "([^"]*)": ', body, re.M)
    assert values and len(texts) == len(values)
    return [(name, int(value), t) for (name, value), t in zip(values, texts)]


def test_status_matches_proto():
    want = {re.sub(r"^ERROR_", "", name): value for name, value, _ in proto_statuses()}
    have = {s.name: int(s) for s in ruda.Status}
    assert have == want


def test_every_error_has_its_class():
    for name, value, _ in proto_statuses():
        cls = ruda.errors.error_class(value)
        if value == 0:
            continue
        assert cls is not ruda.Error, name
        assert issubclass(cls, ruda.Error)
        assert cls(value).status == value


def test_strerror_is_the_protos_text():
    for name, value, text in proto_statuses():
        assert ruda.client.strerror(value) == text, name
    assert ruda.client.strerror(1000) == "unknown status"
