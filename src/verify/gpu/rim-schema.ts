/**
 * The structure a RIM must have before any of its fields is trusted: the constraints of ISO/IEC 19770-2:2015's SWID
 * schema (swid_schema_2015.xsd, which NVIDIA's verifier validates against) that bear on what Sigil reads, plus
 * NVIDIA's own shape (one Meta, one Payload of Measurement resources). Checked on the signed document.
 */
import type { Element } from '@xmldom/xmldom';

export const SWID_NS = 'http://standards.iso.org/iso/19770/-2/2015/schema.xsd';
const XMLDSIG_NS = 'http://www.w3.org/2000/09/xmldsig#';

/** The children the schema allows under SoftwareIdentity (then any element of another namespace, e.g. ds:Signature). */
const ROOT_CHILDREN = new Set(['Entity', 'Evidence', 'Link', 'Meta', 'Payload']);
/** The children the schema allows under Payload. */
const PAYLOAD_CHILDREN = new Set(['Directory', 'File', 'Process', 'Resource']);
const XSD_BOOLEAN = /^(?:true|false|1|0)$/;
const XSD_INTEGER = /^[+-]?\d+$/;
const NON_NEGATIVE = /^\+?\d+$/;
const POSITIVE = /^\+?0*[1-9]\d*$/;

const elements = (el: Element): Element[] => Array.from(el.childNodes).filter((n): n is Element => n.nodeType === 1);

function present(el: Element, name: string): boolean {
  const value = el.getAttribute(name);
  return value !== null && value.trim() !== '';
}

/** What in `root` (a parsed SWID tag) breaks the schema or NVIDIA's shape, in words; empty when nothing does. */
export function rimSchemaProblems(root: Element): string[] {
  const problems: string[] = [];
  if (root.localName !== 'SoftwareIdentity' || root.namespaceURI !== SWID_NS) return [`the root element is ${root.tagName}, not a SWID SoftwareIdentity`];
  for (const name of ['name', 'tagId']) if (!present(root, name)) problems.push(`SoftwareIdentity has no ${name} (required)`);
  for (const name of ['corpus', 'patch', 'supplemental']) {
    const value = root.getAttribute(name);
    if (value !== null && value !== '' && !XSD_BOOLEAN.test(value)) problems.push(`SoftwareIdentity ${name}="${value}" is not an xs:boolean`);
  }
  const tagVersion = root.getAttribute('tagVersion');
  if (tagVersion !== null && tagVersion !== '' && !XSD_INTEGER.test(tagVersion))
    problems.push(`SoftwareIdentity tagVersion="${tagVersion}" is not an xs:integer`);

  const children = elements(root);
  for (const child of children) {
    if (child.namespaceURI === SWID_NS && !ROOT_CHILDREN.has(child.localName ?? ''))
      problems.push(`SoftwareIdentity holds a ${child.localName} element, which the SWID schema does not allow there`);
    if (child.namespaceURI === XMLDSIG_NS && child.localName !== 'Signature')
      problems.push(`SoftwareIdentity holds a ds:${child.localName} element outside the signature`);
  }
  const named = (name: string) => children.filter((c) => c.namespaceURI === SWID_NS && c.localName === name);

  const entities = named('Entity');
  if (entities.length === 0) problems.push('the RIM names no Entity (the SWID schema requires the tag creator)');
  for (const entity of entities) {
    if (!present(entity, 'name')) problems.push('an Entity has no name (required)');
    if (!present(entity, 'role')) problems.push('an Entity has no role (required)');
  }
  if (entities.length > 0 && !entities.some((e) => (e.getAttribute('role') ?? '').split(/\s+/).includes('tagCreator')))
    problems.push('no Entity has the role tagCreator');

  const metas = named('Meta');
  if (metas.length !== 1) problems.push(`the RIM holds ${metas.length} Meta elements, not 1`);
  if (named('Evidence').length > 0) problems.push('the RIM holds Evidence: a reference manifest carries a Payload, not Evidence');
  const payloads = named('Payload');
  if (payloads.length !== 1) {
    problems.push(`the RIM holds ${payloads.length} Payload elements, not 1`);
    return problems;
  }
  const resources = elements(payloads[0]!);
  for (const r of resources) {
    if (r.namespaceURI !== SWID_NS || !PAYLOAD_CHILDREN.has(r.localName ?? ''))
      problems.push(`the Payload holds a ${r.tagName} element, which the SWID schema does not allow there`);
    else if (r.localName === 'Resource' && !present(r, 'type')) problems.push('a Payload Resource has no type (required)');
  }
  const measurements = resources.filter((r) => r.localName === 'Resource' && r.getAttribute('type') === 'Measurement');
  if (measurements.length === 0) problems.push('the Payload lists no Measurement resource');
  const outside = Array.from(root.getElementsByTagNameNS(SWID_NS, 'Resource')).filter(
    (r) => r.getAttribute('type') === 'Measurement' && r.parentNode !== payloads[0],
  );
  if (outside.length > 0) problems.push(`${outside.length} Measurement resource(s) lie outside the Payload`);
  for (const m of measurements) {
    const at = `Measurement ${m.getAttribute('index') ?? '?'}`;
    const typed: Array<[string, RegExp, string]> = [
      ['index', NON_NEGATIVE, 'a non-negative integer'],
      ['alternatives', POSITIVE, 'a positive integer'],
      ['size', POSITIVE, 'a positive integer'],
      ['active', /^(?:True|False)$/, 'True or False'],
    ];
    for (const [name, type, words] of typed) {
      const value = m.getAttribute(name);
      if (value === null || !type.test(value)) problems.push(`${at}: ${name}=${value === null ? '(missing)' : `"${value}"`} is not ${words}`);
    }
  }
  return problems;
}
