"""Broken SCL: every problem is a finding naming file, line and element path; the rest of
the file is still read. Unreadable or unsafe XML is one clear error with its line."""

from __future__ import annotations

import io

import pytest

from goosectl.protocols.scl import SclError, load_scl, parse_scl
from tests.support.procs import goosectl

NS = 'xmlns="http://www.iec.ch/61850/2003/SCL"'

TEMPLATES = """<DataTypeTemplates>
<LNodeType id="LLN0_T" lnClass="LLN0"><DO name="Beh" type="ENS_T"/></LNodeType>
<LNodeType id="GGIO_T" lnClass="GGIO"><DO name="Ind" type="SPS_T"/></LNodeType>
<DOType id="ENS_T" cdc="ENS"><DA name="stVal" bType="Enum" type="E" fc="ST"/></DOType>
<DOType id="SPS_T" cdc="SPS"><DA name="stVal" bType="BOOLEAN" fc="ST"/>
<DA name="q" bType="Quality" fc="ST"/></DOType>
</DataTypeTemplates>"""


def scl(body: str, comm: str = "", templates: str = TEMPLATES) -> bytes:
    return (
        f'<?xml version="1.0"?>\n<SCL {NS} version="2007" revision="B" release="4">\n'
        f"<Communication>{comm}</Communication>\n{body}\n{templates}\n</SCL>\n"
    ).encode()


def ied(name: str, ln0: str, lns: str = "") -> str:
    return (
        f'<IED name="{name}">\n<AccessPoint name="AP1">\n<Server>\n<LDevice inst="LD0">\n'
        f'<LN0 lnClass="LLN0" inst="" lnType="LLN0_T">\n{ln0}\n</LN0>\n'
        f'<LN lnClass="GGIO" inst="1" lnType="GGIO_T"/>\n{lns}\n'
        "</LDevice>\n</Server>\n</AccessPoint>\n</IED>"
    )


def line_of(text: bytes, needle: str) -> int:
    return (
        text.decode().splitlines().index(next(x for x in text.decode().splitlines() if needle in x))
        + 1
    )


def test_missing_data_set_is_a_finding_with_line_and_path_and_the_rest_is_read():
    ln0 = (
        '<DataSet name="ds1"><FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" '
        'daName="stVal" fc="ST"/></DataSet>\n'
        '<GSEControl name="gcb1" appID="a" confRev="1" datSet="ds9"/>\n'
        '<GSEControl name="gcb2" appID="b" confRev="1" datSet="ds1"/>'
    )
    text = scl(ied("P1", ln0))
    s = parse_scl(io.BytesIO(text), "x.scd")
    [f] = s.findings
    assert f.line == line_of(text, 'name="gcb1"')
    assert f.path == (
        "IED[@name=P1]/AccessPoint[@name=AP1]/Server/LDevice[@inst=LD0]/LN0/GSEControl[@name=gcb1]"
    )
    assert str(f) == f'x.scd:{f.line}: {f.path}: datSet "ds9" not found'
    # the broken control block is still listed; the good one is complete
    g1, g2 = s.ied("P1").gocbs
    assert g1.members is None and g1.gocb_ref == "P1LD0/LLN0$GO$gcb1"
    assert g2.shape == ("boolean",)


@pytest.mark.parametrize(
    ("fcda", "message"),
    [
        (
            '<FCDA ldInst="LD0" lnClass="GGIO" lnInst="7" doName="Ind" daName="stVal" fc="ST"/>',
            'LD0/GGIO7.Ind.stVal[ST]: LN "GGIO7" not found',
        ),
        (
            '<FCDA ldInst="LD9" lnClass="GGIO" lnInst="1" doName="Ind" daName="stVal" fc="ST"/>',
            'LD9/GGIO1.Ind.stVal[ST]: LDevice "LD9" not found in IED "P1"',
        ),
        (
            '<FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Pos" daName="stVal" fc="ST"/>',
            'LD0/GGIO1.Pos.stVal[ST]: DO "Pos" is not in LNodeType "GGIO_T"',
        ),
        (
            '<FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" daName="t" fc="ST"/>',
            'LD0/GGIO1.Ind.t[ST]: DA "t" is not in DOType "SPS_T"',
        ),
        (
            '<FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" daName="q" fc="MX"/>',
            'LD0/GGIO1.Ind.q[MX]: DA "q" has fc ST, not MX',
        ),
        (
            '<FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" fc="CF"/>',
            'LD0/GGIO1.Ind[CF]: DOType "SPS_T" has no attribute with fc CF',
        ),
    ],
)
def test_broken_fcda_is_a_finding_on_that_fcda(fcda, message):
    ok = '<FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" daName="q" fc="ST"/>'
    ln0 = (
        f'<DataSet name="ds">\n{ok}\n{fcda}\n</DataSet>\n'
        '<GSEControl name="g" appID="a" confRev="1" datSet="ds"/>'
    )
    text = scl(ied("P1", ln0))
    s = parse_scl(io.BytesIO(text), "x.scd")
    [f] = s.findings
    assert f.message == message
    assert f.path.endswith("/LN0/DataSet[@name=ds]/FCDA[2]")
    assert f.line == line_of(text, fcda)
    [g] = s.ied("P1").gocbs
    assert [m.shape for m in g.members] == ["bit-string/13", None]
    assert g.shape is None  # one member unknown: the data set's shape is unknown


def test_bad_addresses_and_references_are_findings_each():
    comm = (
        '<SubNetwork name="S"><ConnectedAP iedName="P1" apName="AP1">\n'
        '<GSE ldInst="LD0" cbName="g"><Address><P type="MAC-Address">01-0C-CD-01-00</P>'
        '<P type="APPID">XYZ1</P><P type="VLAN-ID">1000</P><P type="VLAN-PRIORITY">9</P>'
        "</Address></GSE>\n"
        '<GSE ldInst="LD0" cbName="ghost"><Address><P type="APPID">0001</P></Address></GSE>\n'
        "</ConnectedAP></SubNetwork>"
    )
    ln0 = (
        '<DataSet name="ds"><FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" '
        'daName="stVal" fc="ST"/></DataSet>\n'
        '<GSEControl name="g" appID="a" confRev="x" datSet="ds"/>'
    )
    sub_lns = (
        '<LN lnClass="GGIO" inst="2" lnType="GGIO_T"><Inputs>\n'
        '<ExtRef iedName="P1" serviceType="GOOSE" ldInst="LD0" lnClass="GGIO" lnInst="1" '
        'doName="Ind" daName="stVal" srcLDInst="LD0" srcCBName="nope"/>\n'
        '<ExtRef iedName="P1" serviceType="GOOSE" ldInst="LD0" lnClass="GGIO" lnInst="1" '
        'doName="Ind" daName="q" srcLDInst="LD0" srcCBName="g"/>\n'
        '<ExtRef iedName="P9" serviceType="GOOSE" ldInst="LD0" lnClass="GGIO" lnInst="1" '
        'doName="Ind" daName="q"/>\n'
        "</Inputs></LN>\n"
        '<LN lnClass="LGOS" inst="1" lnType="GGIO_T"><DOI name="GoCBRef"><DAI name="setSrcRef">'
        "<Val>P1LD0/LLN0.other</Val></DAI></DOI></LN>"
    )
    text = scl(ied("P1", ln0) + "\n" + ied("S1", "", sub_lns), comm)
    s = parse_scl(io.BytesIO(text), "x.scd")
    got = {(f.path.rsplit("/", 1)[-1], f.message) for f in s.findings}
    assert got == {
        (
            "P[@type=MAC-Address]",
            'MAC-Address "01-0C-CD-01-00" is not six hex octets like 01-0C-CD-01-00-01',
        ),
        ("P[@type=APPID]", 'APPID "XYZ1" is not hexadecimal'),
        ("P[@type=VLAN-ID]", 'VLAN-ID "1000" is above 0xFFF'),
        ("P[@type=VLAN-PRIORITY]", 'VLAN-PRIORITY "9" is not 0..7'),
        (
            "GSE[@ldInst=LD0][@cbName=ghost]",
            'no GSEControl "ghost" in LDevice "LD0" of IED "P1" access point "AP1"',
        ),
        ("GSEControl[@name=g]", 'confRev "x" is not a number'),
        ("GSEControl[@name=g]", "confRev is missing"),
        ("ExtRef[1]", 'srcCBName "nope": no GSEControl in IED "P1" LDevice "LD0" LLN0'),
        ("ExtRef[2]", 'P1 LD0/GGIO1.Ind.q is not in data set "ds" of P1LD0/LLN0$GO$g'),
        ("ExtRef[3]", 'iedName "P9": no such IED in this file'),
        ("Val", 'GoCBRef.setSrcRef "P1LD0/LLN0.other" names no GOOSE control block here'),
    }
    # the parts that are fine are still there: the GoCB with what its address still says
    [g] = s.ied("P1").gocbs
    assert g.address.mac is None and g.address.appid is None and g.shape == ("boolean",)
    assert s.ied("S1").subscribes == []


def test_vendor_namespaces_and_private_content_are_read_past():
    ln0 = (
        '<Private type="v"><FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" '
        'daName="q" fc="ST"/></Private>\n'
        '<DataSet name="ds" xmlns:v="urn:v" v:extra="1">'
        '<v:FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" daName="q" fc="ST"/>'
        '<FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" daName="stVal" fc="ST"/>'
        "</DataSet>\n"
        '<GSEControl name="g" appID="a" confRev="1" datSet="ds"/>'
    )
    s = parse_scl(io.BytesIO(scl(ied("P1", ln0))), "x.scd")
    assert s.findings == []
    assert s.ied("P1").gocbs[0].shape == ("boolean",)


def test_unqualified_scl_and_ldname_are_read():
    text = (
        scl(ied("P1", '<GSEControl name="g" appID="a" confRev="3"/>'))
        .replace(NS.encode(), b"")
        .replace(b'<LDevice inst="LD0">', b'<LDevice inst="LD0" ldName="BAY1_CTRL">')
    )
    s = parse_scl(io.BytesIO(text), "x.scd")
    [g] = s.ied("P1").gocbs
    assert g.gocb_ref == "BAY1_CTRL/LLN0$GO$g" and g.conf_rev == 3 and g.members is None


def test_line_numbers_past_65535_are_exact():
    pad = "<!-- padding -->\n" * 70_000
    ln0 = pad + '<GSEControl name="g" appID="a" confRev="1" datSet="nope"/>'
    text = scl(ied("P1", ln0))
    [f] = parse_scl(io.BytesIO(text), "x.scd").findings
    assert f.line == line_of(text, 'datSet="nope"') > 70_000


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        (
            b'<?xml version="1.0"?>\n<!DOCTYPE SCL [<!ENTITY a "aaaaaaaaaa"><!ENTITY b '
            b'"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>\n<SCL>&b;</SCL>',
            "DTDForbidden",
        ),
        (
            b'<?xml version="1.0"?>\n<!DOCTYPE SCL SYSTEM "http://example.invalid/x.dtd">\n<SCL/>',
            "DTDForbidden",
        ),
        (b'<?xml version="1.0"?>\n<SCL>\n<IED name="x">\n</SCL>\n', "not well-formed XML"),
        (b"hello", "not well-formed XML"),
        (b'<?xml version="1.0"?>\n<html/>', "not an SCL file: the root element is html"),
        (b'<x:SCL xmlns:x="urn:other"/>', "not an SCL file"),
    ],
)
def test_unsafe_or_broken_xml_is_one_error_with_a_line(doc, why, tmp_path):
    p = tmp_path / "bad.scd"
    p.write_bytes(doc)
    with pytest.raises(SclError) as exc:
        load_scl(p)
    assert why in str(exc.value) and str(exc.value).startswith(f"{p}:")
    r = goosectl("scl", "show", str(p), check=False)
    assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr


def test_entity_expansion_is_refused_before_it_costs_anything():
    # the billion laughs: 10^9 "lol"s if expanded; refused at the first declaration
    decl = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10 if i else "lol"}">' for i in range(10))
    doc = f'<?xml version="1.0"?>\n<!DOCTYPE SCL [{decl}]>\n<SCL {NS}>&l9;</SCL>'.encode()
    with pytest.raises(SclError, match="refused"):
        parse_scl(io.BytesIO(doc), "bomb.scd")


def test_an_unreadable_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(SclError, match="No such file"):
        load_scl(tmp_path / "missing.scd")


@pytest.mark.parametrize(
    "head",
    [
        f"<SCL {NS}>",  # SCL 2003 (Ed1): no version attributes
        f'<SCL {NS} version="2007" revision="B">',
        f'<SCL {NS} version="2007" revision="B" release="4">',
    ],
)
def test_every_edition_reads_alike(head):
    ln0 = (
        '<DataSet name="ds"><FCDA ldInst="LD0" lnClass="GGIO" lnInst="1" doName="Ind" '
        'daName="stVal" fc="ST"/></DataSet><GSEControl name="g" appID="a" confRev="1" datSet="ds"/>'
    )
    text = (
        scl(ied("P1", ln0))
        .decode()
        .replace(f'<SCL {NS} version="2007" revision="B" release="4">', head)
    )
    s = parse_scl(io.BytesIO(text.encode()), "x.scd")
    assert s.findings == [] and s.gocbs["P1LD0/LLN0$GO$g"].shape == ("boolean",)


def test_lgos_names_the_control_block_it_supervises():
    from tests.support.peers import REPO as repo

    view = load_scl(repo / "examples" / "scl" / "bay1.scd").ied("GCTL1")
    got = [(lg.ln.name, lg.setting, lg.gocb.gocb_ref if lg.gocb else None) for lg in view.lgos]
    assert got == [
        ("LGOS1", "PROT1LD0/LLN0.trip", "PROT1LD0/LLN0$GO$trip"),
        ("LGOS2", "BAY2LD0/LLN0.cilo", "BAY2LD0/LLN0$GO$cilo"),
        ("LGOS3", "SCADA1LD0/LLN0.cmd", "SCADA1LD0/LLN0$GO$cmd"),
    ]
