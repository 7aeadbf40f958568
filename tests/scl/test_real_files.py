"""`goosectl scl show --json` on SCL files nobody here wrote (OpenSCD's test fixtures,
tests/data/scl/PROVENANCE.md), against what a careful reading of the XML gives.

The expected objects below were worked out by hand from the files: control blocks from
the LN0 GSEControls, references built as <IED><LDinst>/LLN0$GO$<name>, addresses from the
Communication section (APPID and VLAN-ID are hex), member types by following each FCDA
through its LN's lnType, DO type and DA bType, subscriptions from the bound ExtRefs.
"""

from __future__ import annotations

import json

from tests.support.peers import SCL
from tests.support.procs import goosectl


def show_json(path, *extra: str) -> tuple[dict, str]:
    r = goosectl("scl", "show", str(path), "--json", *extra)
    return json.loads(r.stdout), r.stderr


def member(ref: str, type_: object) -> dict:
    return {"ref": ref, "type": type_}


def test_later_binding_file_gives_both_gocbs_and_the_subscription():
    got, err = show_json(SCL / "LaterBindingGOOSE2007B4.scd")
    pub = "GOOSE_PublisherQB2_Disconnector"
    # CSWI1 of QB2_Disconnector is "Dummy.CSWI": Pos is OpenSCD_DPC, whose stVal is an
    # Enum (BehaviourModeKind) -> MMS integer; q is Quality -> 13-bit string. The CILO
    # EnaOpn/EnaCls are OpenSCD_SPS_simple: stVal BOOLEAN.
    gooses2 = [
        member("QB2_Disconnector/CSWI1.Pos.stVal[ST]", "integer"),
        member("QB2_Disconnector/CSWI1.Pos.q[ST]", "bit-string/13"),
        member("QB1_Disconnector/CILO1.EnaOpn.stVal[ST]", "boolean"),
        member("QB1_Disconnector/CILO1.EnaCls.stVal[ST]", "boolean"),
        member("QB2_Disconnector/CILO1.EnaOpn.stVal[ST]", "boolean"),
    ]
    goose1 = [
        member("QB1_Disconnector/CSWI1.Pos.stVal[ST]", "integer"),
        member("QB1_Disconnector/CSWI1.Pos.q[ST]", "bit-string/13"),
    ]
    expected = {
        "ieds": [
            {
                "name": "GOOSE_Subscriber",
                "gocbs": [],
                # 8 bound ExtRefs, all srcCBName GOOSE2 of QB2_Disconnector
                "subscribes": [f"{pub}/LLN0$GO$GOOSE2"],
            },
            {
                "name": "GOOSE_Publisher",
                "gocbs": [
                    {
                        "gocbRef": f"{pub}/LLN0$GO$GOOSE2",
                        "datSet": f"{pub}/LLN0$GOOSE2sDataSet",
                        "goID": "GOOSE2",
                        "confRev": 1,
                        "appid": 0x0002,
                        "dst": "01:0c:cd:01:00:01",
                        "vlanId": None,
                        "vlanPriority": None,
                        "minTime": 10,
                        "maxTime": 1000,
                        "members": gooses2,
                    },
                    {
                        "gocbRef": f"{pub}/LLN0$GO$GOOSE1",
                        "datSet": f"{pub}/LLN0$GOOSE1sDataSet",
                        "goID": "GOOSE1",
                        "confRev": 1,
                        "appid": 0x0001,
                        "dst": "01:0c:cd:01:00:00",
                        "vlanId": None,
                        "vlanPriority": None,
                        "minTime": 10,
                        "maxTime": 1000,
                        "members": goose1,
                    },
                ],
                "subscribes": [],
            },
        ]
    }
    assert got == expected
    assert err == ""  # nothing broken in this file


def test_valid_2007b4_file_gives_addresses_ed1_bindings_and_no_data_set():
    got, err = show_json(SCL / "valid2007B4.scd")
    gcb_members = [
        # XCBR1 (Dummy.XCBR1) Pos is Dummy.XCBR1.Pos: stVal Dbpos, q Quality
        member("CircuitBreaker_CB1/XCBR1.Pos.stVal[ST]", "bit-string/2"),
        member("CircuitBreaker_CB1/XCBR1.Pos.q[ST]", "bit-string/13"),
        # CSWI1 of that LDevice is Dummy.CSWIwithoutCtlModel: Pos is Dummy.CSWI.Pos2
        member("CircuitBreaker_CB1/CSWI1.Pos.stVal[ST]", "bit-string/2"),
        # DC XSWI 1 of Disconnectors is Dummy.XSWI1, Pos of type Dummy.XCBR1.Pos
        member("Disconnectors/DCXSWI1.Pos.stVal[ST]", "bit-string/2"),
        member("Disconnectors/DCXSWI1.Pos.q[ST]", "bit-string/13"),
    ]
    expected = {
        "ieds": [
            {
                "name": "IED1",
                "gocbs": [
                    {
                        "gocbRef": "IED1CircuitBreaker_CB1/LLN0$GO$GCB",
                        "datSet": "IED1CircuitBreaker_CB1/LLN0$GooseDataSet1",
                        "goID": "0001",
                        "confRev": 1,
                        "appid": 0x0010,  # <P type="APPID">0010</P> is hex
                        "dst": "01:0c:cd:01:00:10",
                        "vlanId": 5,  # "005"
                        "vlanPriority": 4,
                        "minTime": None,
                        "maxTime": None,
                        "members": gcb_members,
                    },
                    {
                        # GCB2 has no datSet and no GSE element in Communication
                        "gocbRef": "IED1CircuitBreaker_CB1/LLN0$GO$GCB2",
                        "datSet": None,
                        "goID": "0003",
                        "confRev": 1,
                        "appid": None,
                        "dst": None,
                        "vlanId": None,
                        "vlanPriority": None,
                        "minTime": None,
                        "maxTime": None,
                        "members": [],
                    },
                ],
                # DCCSWI1: one ExtRef with srcCBName GCB of IED2 CBSW, one Ed1-style ExtRef
                # (no serviceType, no srcCBName) to XSWI2.Pos.q, which only IED2's GCB data
                # set carries; the third has no iedName (not bound)
                "subscribes": ["IED2CBSW/LLN0$GO$GCB"],
            },
            {
                "name": "IED2",
                "gocbs": [
                    {
                        # the only ConnectedAP of IED2 has no GSE: no address
                        "gocbRef": "IED2CBSW/LLN0$GO$GCB",
                        "datSet": "IED2CBSW/LLN0$GooseDataSet1",
                        "goID": "0002",
                        "confRev": 1,
                        "appid": None,
                        "dst": None,
                        "vlanId": None,
                        "vlanPriority": None,
                        "minTime": None,
                        "maxTime": None,
                        "members": [
                            member("CBSW/XSWI2.Pos.stVal[ST]", "bit-string/2"),
                            member("CBSW/XSWI2.Pos.q[ST]", "bit-string/13"),
                        ],
                    }
                ],
                # Ed1-style ExtRefs (XSWI1 and CSWI1 inputs) to data that IED1's GCB carries
                "subscribes": ["IED1CircuitBreaker_CB1/LLN0$GO$GCB"],
            },
            # IED3 is a merging unit: sampled values only, no GOOSE
            {"name": "IED3", "gocbs": [], "subscribes": []},
        ]
    }
    assert got == expected
    # the vendor-namespace FCDA inside <Private> is not a member of any data set
    assert err == ""


def test_show_one_ied_and_an_unknown_one(tmp_path):
    got, _ = show_json(SCL / "valid2007B4.scd", "--ied", "IED2")
    assert [i["name"] for i in got["ieds"]] == ["IED2"]
    r = goosectl("scl", "show", str(SCL / "valid2007B4.scd"), "--ied", "NOPE", check=False)
    assert r.returncode == 2
    assert 'no IED "NOPE"' in r.stderr and "IED1, IED2, IED3" in r.stderr


def test_text_view_names_bindings_and_unbound_inputs():
    r = goosectl(
        "scl", "show", str(SCL / "LaterBindingGOOSE2007B4.scd"), "--ied", "GOOSE_Subscriber"
    )
    out = r.stdout
    # the two later-binding ExtRefs of CSWI1 with their restrictions, and CILO1's placeholder
    assert "someRestrictedExtRef  (later binding: pLN=CSWI pDO=Pos pDA=q pServT=GOOSE)" in out
    assert "someRestrictedExtRef  (later binding: pLN=CSWI pDO=Pos pDA=stVal pServT=GOOSE)" in out
    assert "CILO1 Pos;CSWI1/Pos/stVal  (unbound)" in out
    # CILO1's bound ExtRef to QB1's CILO EnaCls is the 4th member of GOOSE2
    assert "Earth_Switch/CILO1 <- member 3  intAddr Pos;CILO/EnaCls/stVal" in out
