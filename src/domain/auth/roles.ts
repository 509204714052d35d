import { ROLES, type Role } from "../../store/types.js";

export { ROLES, type Role };

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}
