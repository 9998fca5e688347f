package org.example.shapes;

/** A plane figure; the implementations make the call sites bimorphic. */
public interface Shape {
    double area();

    double perimeter();
}
