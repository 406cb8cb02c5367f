"""`nvidia-smi -q -x`: the XML report (DTD v10 to v13, or none on 418.x).

Only direct children of `<gpu>` are read: MIG devices nest their own `<fb_memory_usage>` and
must not be taken for the GPU's. There is no compute capability in any version of this report.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from llm_fabric.enrollment.inventory import GpuDevice, GpuReport
from llm_fabric.enrollment.parsers import values
from llm_fabric.errors import ParseError

COMMAND = "nvidia-smi -q -x"


def _text(element: ET.Element, path: str) -> str | None:
    found = element.find(path)
    return found.text if found is not None and found.text is not None else None


def parse_query_xml(text: str, command: str = COMMAND) -> GpuReport:
    if "<!ENTITY" in text:
        # the report never defines entities; one that does is not nvidia-smi's (and could expand without end)
        raise ParseError(command, "the XML defines entities, which nvidia-smi never does")
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ParseError(command, f"not well-formed XML ({exc})") from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError(command, f"the root element is <{root.tag}>, expected <nvidia_smi_log>")
    devices = []
    for index, gpu in enumerate(root.findall("gpu")):
        name = values.present(_text(gpu, "product_name"))
        if name is None:
            raise ParseError(command, f"GPU {index} has no <product_name>")
        devices.append(
            GpuDevice(
                index=index,
                name=name,
                uuid=values.present(_text(gpu, "uuid")),
                pci_bus_id=values.present(gpu.get("id")),
                pci_device_id=values.pci_device_id(_text(gpu, "pci/pci_device_id")),
                memory_mib=values.mib(_text(gpu, "fb_memory_usage/total")),
                mig_enabled=values.enabled(_text(gpu, "mig_mode/current_mig")),
                ecc_enabled=values.enabled(_text(gpu, "ecc_mode/current_ecc")),
            )
        )
    if not devices:
        raise ParseError(command, "the report lists no <gpu>")
    driver = values.version(_text(root, "driver_version")) or values.version(_text(root, "kmd_version"))
    cuda = values.version(_text(root, "cuda_version")) or values.version(_text(root, "cuda_umd_version"))
    return GpuReport(command=command, devices=devices, driver_version=driver, cuda_version=cuda)
