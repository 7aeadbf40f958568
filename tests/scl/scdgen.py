"""Generated SCD files for the SCL tests and the large-file benchmark.

The data types are fixed templates written here; `KINDS` says, by hand, which MMS type
each kind of data-set member has (IEC 61850-8-1 mapping), independently of
protocols/scl/types.py, so a test compares the reader with this table, not with itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

_CMV = (
    "structure",
    (("structure", (("structure", ("floating-point/32",)),)), "bit-string/13", "utc-time"),
)
#: kind -> (DO name, DA path or None for a DO-level FCDA, fc, MMS type as data_shape gives it)
KINDS: dict[str, tuple[str, str | None, str, object]] = {
    "bool": ("Ind", "stVal", "ST", "boolean"),
    "q": ("Ind", "q", "ST", "bit-string/13"),
    "t": ("Ind", "t", "ST", "utc-time"),
    "dbpos": ("Pos", "stVal", "ST", "bit-string/2"),
    "int": ("Cnt", "stVal", "ST", "integer"),
    "uint": ("UCnt", "stVal", "ST", "unsigned"),
    "enum": ("Mode", "stVal", "ST", "integer"),
    "float": ("Val", "mag.f", "MX", "floating-point/32"),
    "mag": ("Val", "mag", "MX", ("structure", ("floating-point/32",))),
    "vis": ("Txt", "stVal", "ST", "visible-string"),
    "sps": ("Ind", None, "ST", ("structure", ("boolean", "bit-string/13", "utc-time"))),
    "mv": (
        "Val",
        None,
        "MX",
        ("structure", (("structure", ("floating-point/32",)), "bit-string/13", "utc-time")),
    ),
    "arr": ("Arr", "vals", "ST", ("array", ("integer", "integer", "integer"))),
    # WYE [MX]: phsA and phsB (SDOs of type CMV), each cVal (T_VEC: mag, a T_AV: f), q, t
    "wye": ("A", None, "MX", ("structure", (_CMV, _CMV))),
}

TEMPLATES = """\
	<DataTypeTemplates>
		<LNodeType id="T_LLN0" lnClass="LLN0">
			<DO name="Mod" type="T_ENC"/>
			<DO name="Beh" type="T_ENS"/>
		</LNodeType>
		<LNodeType id="T_GEN" lnClass="GGIO">
			<DO name="Beh" type="T_ENS"/>
			<DO name="Ind" type="T_SPS"/>
			<DO name="Pos" type="T_DPS"/>
			<DO name="Cnt" type="T_INS"/>
			<DO name="UCnt" type="T_INSU"/>
			<DO name="Mode" type="T_ENS"/>
			<DO name="Val" type="T_MV"/>
			<DO name="Txt" type="T_VSS"/>
			<DO name="Arr" type="T_ARR"/>
			<DO name="A" type="T_WYE"/>
		</LNodeType>
		<DOType id="T_ENC" cdc="ENC">
			<DA name="stVal" bType="Enum" type="E_Beh" fc="ST"/>
			<DA name="q" bType="Quality" fc="ST"/>
			<DA name="t" bType="Timestamp" fc="ST"/>
			<DA name="ctlModel" bType="Enum" type="E_Ctl" fc="CF"/>
		</DOType>
		<DOType id="T_ENS" cdc="ENS">
			<DA name="stVal" bType="Enum" type="E_Beh" fc="ST"/>
			<DA name="q" bType="Quality" fc="ST"/>
			<DA name="t" bType="Timestamp" fc="ST"/>
		</DOType>
		<DOType id="T_SPS" cdc="SPS">
			<DA name="stVal" bType="BOOLEAN" fc="ST"/>
			<DA name="q" bType="Quality" fc="ST"/>
			<DA name="t" bType="Timestamp" fc="ST"/>
			<DA name="d" bType="VisString255" fc="DC"/>
		</DOType>
		<DOType id="T_DPS" cdc="DPS">
			<DA name="stVal" bType="Dbpos" fc="ST"/>
			<DA name="q" bType="Quality" fc="ST"/>
			<DA name="t" bType="Timestamp" fc="ST"/>
		</DOType>
		<DOType id="T_INS" cdc="INS">
			<DA name="stVal" bType="INT32" fc="ST"/>
			<DA name="q" bType="Quality" fc="ST"/>
			<DA name="t" bType="Timestamp" fc="ST"/>
		</DOType>
		<DOType id="T_INSU" cdc="INS">
			<DA name="stVal" bType="INT32U" fc="ST"/>
			<DA name="q" bType="Quality" fc="ST"/>
		</DOType>
		<DOType id="T_MV" cdc="MV">
			<DA name="mag" bType="Struct" type="T_AV" fc="MX"/>
			<DA name="q" bType="Quality" fc="MX"/>
			<DA name="t" bType="Timestamp" fc="MX"/>
			<DA name="units" bType="Struct" type="T_Unit" fc="CF"/>
		</DOType>
		<DOType id="T_CMV" cdc="CMV">
			<DA name="cVal" bType="Struct" type="T_VEC" fc="MX"/>
			<DA name="q" bType="Quality" fc="MX"/>
			<DA name="t" bType="Timestamp" fc="MX"/>
		</DOType>
		<DOType id="T_WYE" cdc="WYE">
			<SDO name="phsA" type="T_CMV"/>
			<SDO name="phsB" type="T_CMV"/>
			<DA name="d" bType="VisString255" fc="DC"/>
		</DOType>
		<DOType id="T_VSS" cdc="VSS">
			<DA name="stVal" bType="VisString255" fc="ST"/>
			<DA name="q" bType="Quality" fc="ST"/>
		</DOType>
		<DOType id="T_ARR" cdc="XXX">
			<DA name="vals" bType="INT16" count="3" fc="ST"/>
		</DOType>
		<DAType id="T_AV">
			<BDA name="f" bType="FLOAT32"/>
		</DAType>
		<DAType id="T_VEC">
			<BDA name="mag" bType="Struct" type="T_AV"/>
		</DAType>
		<DAType id="T_Unit">
			<BDA name="SIUnit" bType="Enum" type="E_SI"/>
		</DAType>
		<EnumType id="E_Beh"><EnumVal ord="1">on</EnumVal><EnumVal ord="5">off</EnumVal></EnumType>
		<EnumType id="E_Ctl"><EnumVal ord="0">status-only</EnumVal></EnumType>
		<EnumType id="E_SI"><EnumVal ord="1">none</EnumVal></EnumType>
	</DataTypeTemplates>
"""


@dataclass
class GenGoCB:
    name: str
    members: list[str]
    appid: int
    mac: str
    conf_rev: int = 1
    go_id: str | None = None
    vlan: int | None = None
    priority: int | None = None
    min_ms: int | None = 4
    max_ms: int | None = 1000


@dataclass
class GenSub:
    """An ExtRef: member `member` of GoCB `gocb` of IED `ied`, bound with srcCBName or
    (ed1=True) by its data only; `int_addr` optional."""

    ied: str
    gocb: int
    member: int
    ed1: bool = False
    int_addr: str | None = None


@dataclass
class GenIed:
    name: str
    ld: str = "LD0"
    ld_name: str | None = None
    gocbs: list[GenGoCB] = field(default_factory=list)
    subs: list[GenSub] = field(default_factory=list)
    filler_lns: int = 0  # LNs with instance values, as real IEDs carry (bulk for benchmarks)

    def ld_ref(self) -> str:
        return self.ld_name or f"{self.name}{self.ld}"

    def gocb_ref(self, k: int) -> str:
        return f"{self.ld_ref()}/LLN0$GO${self.gocbs[k].name}"

    def member_ln(self, k: int, j: int) -> tuple[str, str]:
        """(prefix, inst) of the LN that holds member j of GoCB k."""
        return f"G{k}", str(j + 1)


def _fcda(ied: GenIed, k: int, j: int) -> str:
    do, da, fc, _ = KINDS[ied.gocbs[k].members[j]]
    prefix, inst = ied.member_ln(k, j)
    da_attr = f' daName="{da}"' if da else ""
    return (
        f'<FCDA ldInst="{ied.ld}" prefix="{prefix}" lnClass="GGIO" lnInst="{inst}" '
        f'doName="{do}"{da_attr} fc="{fc}"/>'
    )


def _extref(ieds: dict[str, GenIed], s: GenSub) -> str:
    src = ieds[s.ied]
    do, da, _, _ = KINDS[src.gocbs[s.gocb].members[s.member]]
    prefix, inst = src.member_ln(s.gocb, s.member)
    attrs = (
        f'iedName="{src.name}" ldInst="{src.ld}" prefix="{prefix}" lnClass="GGIO" '
        f'lnInst="{inst}" doName="{do}"' + (f' daName="{da}"' if da else "")
    )
    if not s.ed1:
        attrs += (
            f' serviceType="GOOSE" srcLDInst="{src.ld}" srcLNClass="LLN0" '
            f'srcCBName="{src.gocbs[s.gocb].name}"'
        )
    if s.int_addr:
        attrs += f" intAddr={quoteattr(s.int_addr)}"
    return f"<ExtRef {attrs}/>"


def _ied(ieds: dict[str, GenIed], ied: GenIed) -> list[str]:
    ld_name = f' ldName="{ied.ld_name}"' if ied.ld_name else ""
    out = [
        f'\t<IED name="{ied.name}" manufacturer="gen" type="T" configVersion="1">',
        '\t\t<Services><GOOSE max="64"/><ConfDataSet max="64"/></Services>',
        '\t\t<AccessPoint name="AP1">',
        "\t\t\t<Server>",
        '\t\t\t\t<Authentication none="true"/>',
        f'\t\t\t\t<LDevice inst="{ied.ld}"{ld_name}>',
        '\t\t\t\t\t<LN0 lnClass="LLN0" inst="" lnType="T_LLN0">',
    ]
    for k, g in enumerate(ied.gocbs):
        out.append(f'\t\t\t\t\t\t<DataSet name="ds_{g.name}">')
        out += [f"\t\t\t\t\t\t\t{_fcda(ied, k, j)}" for j in range(len(g.members))]
        out.append("\t\t\t\t\t\t</DataSet>")
    for g in ied.gocbs:
        go_id = f" appID={quoteattr(g.go_id)}" if g.go_id is not None else ""
        out.append(
            f'\t\t\t\t\t\t<GSEControl name="{g.name}" type="GOOSE"{go_id} '
            f'confRev="{g.conf_rev}" datSet="ds_{g.name}"/>'
        )
    if ied.subs:
        out.append("\t\t\t\t\t\t<Inputs>")
        out += [f"\t\t\t\t\t\t\t{_extref(ieds, s)}" for s in ied.subs]
        out.append("\t\t\t\t\t\t</Inputs>")
    out.append("\t\t\t\t\t</LN0>")
    for k, g in enumerate(ied.gocbs):
        for j in range(len(g.members)):
            prefix, inst = ied.member_ln(k, j)
            out.append(
                f'\t\t\t\t\t<LN prefix="{prefix}" lnClass="GGIO" inst="{inst}" lnType="T_GEN"/>'
            )
    for n in range(ied.filler_lns):
        out += [
            f'\t\t\t\t\t<LN prefix="F" lnClass="GGIO" inst="{n + 1}" lnType="T_GEN" '
            f'desc="general I/O {n + 1} of {ied.name}">',
            '\t\t\t\t\t\t<DOI name="Ind" desc="binary input">',
            f'\t\t\t\t\t\t\t<DAI name="d"><Val>Input {n + 1} of bay {ied.name}</Val></DAI>',
            "\t\t\t\t\t\t</DOI>",
            '\t\t\t\t\t\t<DOI name="Val">',
            '\t\t\t\t\t\t\t<SDI name="units"><DAI name="SIUnit"><Val>none</Val></DAI></SDI>',
            "\t\t\t\t\t\t</DOI>",
            '\t\t\t\t\t\t<Private type="vendor-settings">',
            '\t\t\t\t\t\t\t<v:Setting xmlns:v="urn:example:vendor" id="42" value="on"/>',
            "\t\t\t\t\t\t</Private>",
            "\t\t\t\t\t</LN>",
        ]
    out += ["\t\t\t\t</LDevice>", "\t\t\t</Server>", "\t\t</AccessPoint>", "\t</IED>"]
    return out


def _gse(ied: GenIed) -> list[str]:
    if not ied.gocbs:
        return []
    out = [f'\t\t\t<ConnectedAP iedName="{ied.name}" apName="AP1">']
    for g in ied.gocbs:
        ps = [
            f'<P type="MAC-Address">{g.mac.upper().replace(":", "-")}</P>',
            f'<P type="APPID">{g.appid:04X}</P>',
        ]
        if g.vlan is not None:
            ps.append(f'<P type="VLAN-ID">{g.vlan:03X}</P>')
        if g.priority is not None:
            ps.append(f'<P type="VLAN-PRIORITY">{g.priority}</P>')
        out.append(f'\t\t\t\t<GSE ldInst="{ied.ld}" cbName="{g.name}">')
        out.append("\t\t\t\t\t<Address>" + "".join(ps) + "</Address>")
        if g.min_ms is not None:
            out.append(f'\t\t\t\t\t<MinTime unit="s" multiplier="m">{g.min_ms}</MinTime>')
        if g.max_ms is not None:
            out.append(f'\t\t\t\t\t<MaxTime unit="s" multiplier="m">{g.max_ms}</MaxTime>')
        out.append("\t\t\t\t</GSE>")
    out.append("\t\t\t</ConnectedAP>")
    return out


def scd_text(ieds: list[GenIed]) -> str:
    by_name = {i.name: i for i in ieds}
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<SCL xmlns="http://www.iec.ch/61850/2003/SCL" version="2007" revision="B" release="4">',
        '\t<Header id="generated"/>',
        "\t<Communication>",
        '\t\t<SubNetwork name="StationBus" type="8-MMS">',
    ]
    for ied in ieds:
        lines += _gse(ied)
    lines += ["\t\t</SubNetwork>", "\t</Communication>"]
    for ied in ieds:
        lines += _ied(by_name, ied)
    lines.append(TEMPLATES + "</SCL>")
    return "\n".join(lines) + "\n"


def station(n_ieds: int, filler_lns: int) -> list[GenIed]:
    """A station for the benchmark: every IED publishes 4 GoCBs of 8 members and
    subscribes to the next IED's first GoCB; `filler_lns` LNs with instance values each."""
    kinds = list(KINDS)
    ieds = []
    for i in range(n_ieds):
        gocbs = [
            GenGoCB(
                name=f"gcb{k}",
                members=[kinds[(i + k + j) % len(kinds)] for j in range(8)],
                appid=(i * 4 + k) % 0x4000,
                mac=f"01:0c:cd:01:{(i * 4 + k) >> 8 & 0xFF:02x}:{(i * 4 + k) & 0xFF:02x}",
                go_id=f"IED{i:03d}_gcb{k}",
                vlan=10,
                priority=4,
            )
            for k in range(4)
        ]
        ieds.append(GenIed(name=f"IED{i:03d}", gocbs=gocbs, filler_lns=filler_lns))
    for i, ied in enumerate(ieds):
        nxt = f"IED{(i + 1) % n_ieds:03d}"
        ied.subs = [GenSub(nxt, 0, j, int_addr=f"in{j}") for j in range(8)]
    return ieds
